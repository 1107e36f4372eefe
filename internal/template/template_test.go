package template

import "testing"

func TestParseRef(t *testing.T) {
	good := map[string]Ref{
		"app":             {"app", "latest"},
		"myteam/app:v1.2": {"myteam/app", "v1.2"},
		"a:B_9":           {"a", "B_9"},
		"x.y-z/q_r":       {"x.y-z/q_r", "latest"},
	}
	for s, want := range good {
		got, err := ParseRef(s)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "App", "a/b/c", "-a", "a-", "a:", "a:.x", "a:-x", "../a", "a/../b", "a b", "a:b:c", "/a", "a/", string(make([]byte, 70))} {
		if r, err := ParseRef(s); err == nil {
			t.Errorf("ParseRef(%q) = %v, want an error", s, r)
		}
	}
}

func TestValidDigest(t *testing.T) {
	if !ValidDigest("sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
		t.Error("a good digest refused")
	}
	for _, d := range []string{"", "sha256:", "sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789", "md5:0123", "sha256:../../etc"} {
		if ValidDigest(d) {
			t.Errorf("ValidDigest(%q) = true", d)
		}
	}
}

package e2bcompat

import (
	"testing"
	"time"
)

// The vectors are what the pinned Python client's get_signature makes.
func TestFileSignature(t *testing.T) {
	if got, want := fileSignature("/home/user/a.txt", "read", "", "wre2b_tok", 0), "v1_DSw+vmVouO2ODbQ2f0o7SZVUX0aMI84DuzZaI41WEEQ"; got != want {
		t.Errorf("no expiration: got %s, want %s", got, want)
	}
	if got, want := fileSignature("notes/b.txt", "write", "root", "wre2b_tok", 1700000060), "v1_Q3SxMdInf7Mcglo+CGdzlUtOixQR+D+6fePBwsu07eA"; got != want {
		t.Errorf("with expiration: got %s, want %s", got, want)
	}
	sig := "v1_Q3SxMdInf7Mcglo+CGdzlUtOixQR+D+6fePBwsu07eA"
	before, after := time.Unix(1700000000, 0), time.Unix(1700000061, 0)
	for _, c := range []struct {
		name, sig, exp, path, op, user, token string
		now                                   time.Time
		ok                                    bool
	}{
		{"valid", sig, "1700000060", "notes/b.txt", "write", "root", "wre2b_tok", before, true},
		{"expired", sig, "1700000060", "notes/b.txt", "write", "root", "wre2b_tok", after, false},
		{"other expiration", sig, "1700000070", "notes/b.txt", "write", "root", "wre2b_tok", before, false},
		{"read for write", sig, "1700000060", "notes/b.txt", "read", "root", "wre2b_tok", before, false},
		{"other path", sig, "1700000060", "notes/c.txt", "write", "root", "wre2b_tok", before, false},
		{"other user", sig, "1700000060", "notes/b.txt", "write", "", "wre2b_tok", before, false},
		{"other token", sig, "1700000060", "notes/b.txt", "write", "root", "wre2b_other", before, false},
		{"bad expiration", sig, "soon", "notes/b.txt", "write", "root", "wre2b_tok", before, false},
	} {
		err := checkFileSignature(c.sig, c.exp, c.path, c.op, c.user, c.token, c.now)
		if (err == nil) != c.ok {
			t.Errorf("%s: got %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

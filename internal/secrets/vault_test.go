package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// testValue is a value distinctive enough to search for in files.
const testValue = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0"

// testVault opens a vault over a fresh database in a fresh directory, and
// returns the paths of its key file and its database.
func testVault(t *testing.T) (v *Vault, st *store.Bolt, keyPath, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	keyPath, dbPath = filepath.Join(dir, "secrets.key"), filepath.Join(dir, "withruntime.db")
	st, err := store.OpenBolt(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err = Open(keyPath, st)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return v, st, keyPath, dbPath
}

func TestRoundTrip(t *testing.T) {
	v, _, keyPath, _ := testVault(t)
	ctx := t.Context()

	fi, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != KeySize || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: got %d bytes mode %v, want %d bytes mode 0600", fi.Size(), fi.Mode().Perm(), KeySize)
	}

	got, err := v.Set(ctx, "acct", "OPENAI_API_KEY", "API.OpenAI.com", testValue)
	if err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got.Name != "OPENAI_API_KEY" || got.Host != "api.openai.com" || got.UpdatedAt.IsZero() {
		t.Errorf("Set: got %+v, want the name, the host in lower case and a time", got)
	}
	if _, err := v.Set(ctx, "acct", "GH_TOKEN", "*.github.com", "ghp_x"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Set(ctx, "other", "OPENAI_API_KEY", "api.openai.com", "other-value"); err != nil {
		t.Fatal(err)
	}

	list, err := v.List(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "GH_TOKEN" || list[1].Name != "OPENAI_API_KEY" || list[0].Host != "*.github.com" {
		t.Errorf("List: got %+v, want GH_TOKEN then OPENAI_API_KEY", list)
	}

	ph, err := v.Placeholders(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^wrsec_[0-9a-f]{32}$`)
	for name, p := range ph {
		if !re.MatchString(p) {
			t.Errorf("placeholder of %s: got %q, want wrsec_ and 32 hex digits", name, p)
		}
	}
	if len(ph) != 2 || ph["OPENAI_API_KEY"] == ph["GH_TOKEN"] {
		t.Errorf("Placeholders: got %v, want two different ones", ph)
	}
	otherPH, _ := v.Placeholders(ctx, "other")
	if otherPH["OPENAI_API_KEY"] == ph["OPENAI_API_KEY"] {
		t.Errorf("two accounts share the placeholder %s", ph["OPENAI_API_KEY"])
	}

	secrets, err := v.ForAccount("acct")
	if err != nil {
		t.Fatalf("ForAccount: %v", err)
	}
	want := []egress.Secret{
		{Name: "GH_TOKEN", Host: "*.github.com", Placeholder: ph["GH_TOKEN"], Value: "ghp_x"},
		{Name: "OPENAI_API_KEY", Host: "api.openai.com", Placeholder: ph["OPENAI_API_KEY"], Value: testValue},
	}
	if !reflect.DeepEqual(secrets, want) {
		t.Errorf("ForAccount: got %+v, want %+v", secrets, want)
	}

	// A new value keeps the placeholder.
	if _, err := v.Set(ctx, "acct", "OPENAI_API_KEY", "api.openai.com", "rotated"); err != nil {
		t.Fatal(err)
	}
	ph2, _ := v.Placeholders(ctx, "acct")
	if ph2["OPENAI_API_KEY"] != ph["OPENAI_API_KEY"] {
		t.Errorf("placeholder changed with the value: %s, then %s", ph["OPENAI_API_KEY"], ph2["OPENAI_API_KEY"])
	}
	secrets, _ = v.ForAccount("acct")
	if secrets[1].Value != "rotated" {
		t.Errorf("after Set: got value %q, want rotated", secrets[1].Value)
	}

	if err := v.Delete(ctx, "acct", "GH_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := v.Delete(ctx, "acct", "GH_TOKEN"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Delete again: got %v, want not_found", err)
	}
	if list, _ := v.List(ctx, "acct"); len(list) != 1 {
		t.Errorf("after Delete: got %+v, want one secret", list)
	}
	if empty, err := v.List(ctx, "nobody"); err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("List of an account without secrets: got %#v, %v; want an empty list", empty, err)
	}
}

func TestReopenWithSameKey(t *testing.T) {
	v, st, keyPath, _ := testVault(t)
	ctx := t.Context()
	if _, err := v.Set(ctx, "acct", "K", "h.example.org", testValue); err != nil {
		t.Fatal(err)
	}
	ph := v.Placeholder("acct", "K")
	key1, _ := os.ReadFile(keyPath)

	v2, err := Open(keyPath, st)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if key2, _ := os.ReadFile(keyPath); !bytes.Equal(key1, key2) {
		t.Fatal("reopening replaced the key file")
	}
	got, err := v2.ForAccount("acct")
	if err != nil || len(got) != 1 || got[0].Value != testValue || got[0].Placeholder != ph {
		t.Errorf("after reopen: got %+v, %v; want the value and the same placeholder", got, err)
	}
}

func TestOtherKeyCannotOpen(t *testing.T) {
	v, st, _, _ := testVault(t)
	ctx := t.Context()
	if _, err := v.Set(ctx, "acct", "K", "h.example.org", testValue); err != nil {
		t.Fatal(err)
	}
	other, err := Open(filepath.Join(t.TempDir(), "other.key"), st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := other.ForAccount("acct")
	if err == nil {
		t.Fatalf("another key opened the secret: %+v", got)
	}
	if strings.Contains(err.Error(), testValue) {
		t.Errorf("error holds the value: %v", err)
	}
	if other.Placeholder("acct", "K") == v.Placeholder("acct", "K") {
		t.Error("another key gives the same placeholder")
	}
	// Names and hosts still list: they are not sealed.
	if list, err := other.List(ctx, "acct"); err != nil || len(list) != 1 {
		t.Errorf("List under another key: got %+v, %v", list, err)
	}
}

func TestTamperedSecretDoesNotOpen(t *testing.T) {
	v, st, _, _ := testVault(t)
	ctx := t.Context()
	if _, err := v.Set(ctx, "acct", "K", "api.example.org", testValue); err != nil {
		t.Fatal(err)
	}
	sealed, err := st.ListSecrets(ctx, "acct")
	if err != nil || len(sealed) != 1 {
		t.Fatal(sealed, err)
	}
	tests := []struct {
		name   string
		change func(s *store.Secret)
	}{
		// Whoever can write the database must not redirect the value.
		{"host changed", func(s *store.Secret) { s.Host = "evil.example.net" }},
		{"moved to another name", func(s *store.Secret) { s.Name = "L" }},
		{"moved to another account", func(s *store.Secret) { s.Account = "acct2" }},
		{"short nonce", func(s *store.Secret) { s.Nonce = s.Nonce[:4] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sealed[0]
			s.Nonce = bytes.Clone(s.Nonce)
			tt.change(&s)
			if err := st.DeleteSecret(ctx, "acct", "K"); err != nil {
				t.Fatal(err)
			}
			if err := st.PutSecret(ctx, s); err != nil {
				t.Fatal(err)
			}
			defer func() {
				st.DeleteSecret(ctx, s.Account, s.Name)
				st.PutSecret(ctx, sealed[0])
			}()
			if got, err := v.ForAccount(s.Account); err == nil {
				t.Errorf("the altered secret opened: %+v", got)
			}
		})
	}
}

func TestValueNotInDatabaseFile(t *testing.T) {
	v, st, keyPath, dbPath := testVault(t)
	if _, err := v.Set(t.Context(), "acct", "K", "h.example.org", testValue); err != nil {
		t.Fatal(err)
	}
	st.Close() // flushes and releases the file
	db, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(testValue)) || bytes.Contains(db, []byte(testValue[8:24])) {
		t.Error("the database file holds the value")
	}
	key, _ := os.ReadFile(keyPath)
	if bytes.Contains(db, key) {
		t.Error("the database file holds the key")
	}
	if !bytes.Contains(db, []byte("h.example.org")) {
		t.Error("the database file does not hold the host: is the test reading the right file?")
	}
}

func TestRefused(t *testing.T) {
	v, _, _, _ := testVault(t)
	ctx := t.Context()
	long := strings.Repeat("A", MaxNameLen+1)
	tests := []struct {
		name, secret, host, value string
		wantMsg                   string
	}{
		{"empty name", "", "h.example.org", testValue, "name is required"},
		{"name with dash", "sk-live-value", "h.example.org", testValue, "environment variable name"},
		{"name starting with a digit", "1KEY", "h.example.org", testValue, "environment variable name"},
		{"name with space", "MY KEY", "h.example.org", testValue, "environment variable name"},
		{"name too long", long, "h.example.org", testValue, "at most 128"},
		{"name PATH", "PATH", "h.example.org", testValue, "PATH is set"},
		{"name of the trust store", "SSL_CERT_FILE", "h.example.org", testValue, "SSL_CERT_FILE is set"},
		{"name of the platform", "WITHRUNTIME_ENV_KEYS", "h.example.org", testValue, "WITHRUNTIME_"},
		{"name LD_PRELOAD", "LD_PRELOAD", "h.example.org", testValue, "LD_"},
		{"empty host", "K", "", testValue, "host is required"},
		{"IPv4 host", "K", "192.0.2.1", testValue, "not an IP address"},
		{"IPv6 host", "K", "::1", testValue, "not an IP address"},
		{"bracketed IPv6 host", "K", "[2001:db8::1]", testValue, "not an IP address"},
		{"numeric last label", "K", "127.1", testValue, "not an IP address"},
		{"host with port", "K", "api.openai.com:443", testValue, "without a port"},
		{"URL", "K", "https://api.openai.com/v1", testValue, "without a scheme"},
		{"wildcard inside", "K", "api.*.com", testValue, "wildcard"},
		{"bare wildcard", "K", "*", testValue, "wildcard"},
		{"wildcard on a TLD", "K", "*.com", testValue, "at least two labels"},
		{"empty label", "K", "api..com", testValue, "labels of 1 to 63"},
		{"long label", "K", strings.Repeat("a", 64) + ".com", testValue, "labels of 1 to 63"},
		{"long host", "K", strings.Repeat("a.", 130) + "com", testValue, "at most 253"},
		{"underscore", "K", "my_host.example.org", testValue, "letters, digits and '-'"},
		{"leading dash", "K", "-a.example.org", testValue, "starts or ends"},
		{"unicode", "K", "bücher.example", testValue, "punycode"},
		{"space", "K", "a b.example", testValue, "letters, digits"},
		{"empty value", "K", "h.example.org", "", "value is empty"},
		{"value too large", "K", "h.example.org", strings.Repeat("v", MaxValueBytes+1), "larger than 16384"},
		{"value with NUL", "K", "h.example.org", testValue + "\x00", "NUL"},
		{"value with newline", "K", "h.example.org", testValue + "\n", "line break"},
		{"value with CR", "K", "h.example.org", "a\rb", "line break"},
		{"value with escape", "K", "h.example.org", "a\x1bb", "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Set(ctx, "acct", tt.secret, tt.host, tt.value)
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("got %v, want invalid_request", err)
			}
			msg := sandbox.MessageOf(err)
			if !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message: got %q, want it to say %q", msg, tt.wantMsg)
			}
			if strings.Contains(err.Error(), testValue) || strings.Contains(err.Error(), "sk-live-value") {
				t.Errorf("error holds a value: %v", err)
			}
		})
	}
	if list, _ := v.List(ctx, "acct"); len(list) != 0 {
		t.Errorf("refused secrets were stored: %+v", list)
	}
}

func TestHostsAccepted(t *testing.T) {
	tests := map[string]string{
		"api.openai.com":        "api.openai.com",
		"API.OpenAI.COM":        "api.openai.com",
		"api.openai.com.":       "api.openai.com",
		"*.Example.org":         "*.example.org",
		"localhost":             "localhost",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"a-b.c1.example":        "a-b.c1.example",
		"upstream.test":         "upstream.test",
	}
	for in, want := range tests {
		got, err := NormalizeHost(in)
		if err != nil || got != want {
			t.Errorf("NormalizeHost(%q): got %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestPerAccountLimit(t *testing.T) {
	v, _, _, _ := testVault(t)
	ctx := t.Context()
	for i := range MaxPerAccount {
		if _, err := v.Set(ctx, "acct", "K"+strings.Repeat("X", i), "h.example.org", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Set(ctx, "acct", "ONE_MORE", "h.example.org", "v"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("secret %d: got %v, want invalid_request", MaxPerAccount+1, err)
	}
	// Replacing one is still allowed.
	if _, err := v.Set(ctx, "acct", "K", "h.example.org", "w"); err != nil {
		t.Errorf("replacing at the limit: %v", err)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("too short"), 0o600)
	if _, err := Open(short, st); err == nil || !strings.Contains(err.Error(), "not 32 bytes") {
		t.Errorf("short key file: got %v, want a size error", err)
	}
	open := filepath.Join(dir, "open.key")
	os.WriteFile(open, bytes.Repeat([]byte{1}, KeySize), 0o644)
	os.Chmod(open, 0o644)
	if _, err := Open(open, st); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("key file readable by others: got %v, want a mode error", err)
	}
	if _, err := Open(filepath.Join(dir, "no-such-dir", "k"), st); err == nil {
		t.Error("key file in a missing directory: got nil error")
	}
	if _, err := Open(dir, st); err == nil {
		t.Error("a directory as key file: got nil error")
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".secrets-key-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

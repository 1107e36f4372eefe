package agent

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// filesAsUserSetup makes, for an agent whose user is testUID, a workspace
// of the user's, a 0600 file of root's (secret) and a 0755 directory of
// root's (locked), both outside the workspace, and returns the agent and
// the two paths.
func filesAsUserSetup(t *testing.T) (a *testAgent, secret, locked string) {
	t.Helper()
	cfg, base := asUserConfig(t)
	if err := os.Mkdir(cfg.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cfg.Workspace, testUID, testGID); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked = filepath.Join(base, "locked")
	if err := os.Mkdir(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(locked, "kept"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	return serveAgent(t, cfg, nil), secret, locked
}

func oneFileTar(t *testing.T, name, body string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, body)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestFilesActAsUser: the files routes act as the user they name, and the
// kernel's permission checks apply: the default user may not read root's
// 0600 file nor make anything in root's 0755 directory, by any route,
// and each refusal is forbidden (403), not internal; root may.
func TestFilesActAsUser(t *testing.T) {
	a, secret, locked := filesAsUserSetup(t)
	inLocked := filepath.Join(locked, "new")

	for _, user := range []string{"", "&user=user"} {
		denied := []struct {
			method, path string
			body         io.Reader
		}{
			{"GET", "/files" + q(secret) + user, nil},
			{"GET", "/archive" + q(secret) + user, nil},
			{"PUT", "/files" + q(inLocked) + user, strings.NewReader("x")},
			{"PUT", "/files" + q(filepath.Join(locked, "kept")) + user, strings.NewReader("x")},
			{"PUT", "/files" + q(filepath.Join(inLocked, "deeper", "f")) + user, strings.NewReader("x")},
			{"POST", "/files/mkdir" + q(inLocked) + user, nil},
			{"PUT", "/archive" + q(locked) + user, oneFileTar(t, "new", "x")},
			{"PUT", "/archive" + q(inLocked) + user, oneFileTar(t, "f", "x")},
			{"DELETE", "/files" + q(filepath.Join(locked, "kept")) + user, nil},
			{"DELETE", "/files" + q(secret) + "&recursive=true" + user, nil},
		}
		for _, d := range denied {
			msg := a.wantError(d.method, d.path, d.body, http.StatusForbidden, "forbidden")
			if !strings.Contains(msg, "user=root") {
				t.Errorf("%s %s: message %q does not say how to act as root", d.method, d.path, msg)
			}
		}
	}
	if _, err := os.Lstat(inLocked); err == nil {
		t.Errorf("%s was made by a refused request", inLocked)
	}
	if b, err := os.ReadFile(filepath.Join(locked, "kept")); err != nil || string(b) != "k" {
		t.Errorf("kept: got %q, %v: a refused request changed it", b, err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("secret: %v: a refused request removed it", err)
	}

	// The user reads and lists what the kernel lets it: the directory is
	// 0755, so listing and stat are allowed (the secret's size shows, its
	// content does not).
	a.doJSON("GET", "/files/list"+q(locked), nil, http.StatusOK, nil)
	a.doJSON("GET", "/files/stat"+q(secret), nil, http.StatusOK, nil)
	if err := os.Chmod(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	a.wantError("GET", "/files/list"+q(locked), nil, http.StatusForbidden, "forbidden")
	a.wantError("GET", "/files/stat"+q(filepath.Join(locked, "kept")), nil, http.StatusForbidden, "forbidden")
	a.wantError("GET", "/archive"+q(locked), nil, http.StatusForbidden, "forbidden")
	if err := os.Chmod(locked, 0o755); err != nil {
		t.Fatal(err)
	}

	// Root may do all of it, and what root makes is root's.
	const asRoot = "&user=root"
	if _, b := a.do("GET", "/files"+q(secret)+asRoot, nil); string(b) != "root only" {
		t.Errorf("root reading the secret: got %q", b)
	}
	resp, b := a.do("GET", "/archive"+q(secret)+asRoot, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "root only") {
		t.Errorf("root's archive of the secret: got %d %q", resp.StatusCode, b)
	}
	a.doJSON("PUT", "/files"+q(inLocked)+asRoot, strings.NewReader("by root"), http.StatusOK, nil)
	a.doJSON("PUT", "/archive"+q(locked)+asRoot, oneFileTar(t, "from-tar", "t"), http.StatusOK, nil)
	a.doJSON("POST", "/files/mkdir"+q(filepath.Join(locked, "d"))+asRoot, nil, http.StatusOK, nil)
	for _, p := range []string{inLocked, filepath.Join(locked, "from-tar"), filepath.Join(locked, "d")} {
		if !ownedBy(p, 0) {
			t.Errorf("%s: want it made, and root's", p)
		}
	}
	a.doJSON("DELETE", "/files"+q(filepath.Join(locked, "kept"))+asRoot, nil, http.StatusNoContent, nil)

	// In its own workspace the user still does everything, and what it
	// makes is its own.
	a.doJSON("PUT", "/files"+q("mine/f"), strings.NewReader("m"), http.StatusOK, nil)
	a.doJSON("PUT", "/archive"+q("tree"), oneFileTar(t, "a/b", "t"), http.StatusOK, nil)
	a.doJSON("POST", "/files/mkdir"+q("made"), nil, http.StatusOK, nil)
	if _, b := a.do("GET", "/files"+q("mine/f"), nil); string(b) != "m" {
		t.Errorf("reading its own file: got %q", b)
	}
	for _, p := range []string{"mine", "mine/f", "tree", "tree/a", "tree/a/b", "made"} {
		a.wantOwner(p, testUID, testGID)
	}
	a.doJSON("DELETE", "/files"+q("tree")+"&recursive=true", nil, http.StatusNoContent, nil)
}

// TestFilesArchiveCutOnUnreadable: an archive of a tree holding a file
// the user may not read is cut (the client sees a broken stream), never
// a whole-looking archive without it.
func TestFilesArchiveCutOnUnreadable(t *testing.T) {
	a, _, locked := filesAsUserSetup(t)
	if err := os.WriteFile(filepath.Join(locked, "z-secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", a.url+"/archive"+q(locked), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // cut before the first bytes left the agent's buffer
	}
	defer resp.Body.Close()
	tr := tar.NewReader(resp.Body)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			t.Fatal("got a whole archive; want it cut at the unreadable file")
		}
		if err != nil {
			break // cut, as it should be
		}
		if hdr.Name == "z-secret" {
			if b, err := io.ReadAll(tr); err == nil && string(b) == "s" {
				t.Fatal("the archive holds a file the user may not read")
			}
		}
	}
}

// TestFilesCredentialsStayOnTheirThread: many requests as the user and as
// root at once; each gets its own answer, so no thread that acted as the
// user ever serves a root request (nor the reverse).
func TestFilesCredentialsStayOnTheirThread(t *testing.T) {
	a, secret, _ := filesAsUserSetup(t)
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user, want := "", http.StatusForbidden
			if i%2 == 0 {
				user, want = "&user=root", http.StatusOK
			}
			resp, err := http.Get(a.url + "/files" + q(secret) + user)
			if err != nil {
				errs <- err.Error()
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				errs <- fmt.Sprintf("request %d (%q): got %d, want %d", i, user, resp.StatusCode, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if os.Geteuid() != 0 {
		t.Errorf("the test's own thread now has euid %d", os.Geteuid())
	}
}

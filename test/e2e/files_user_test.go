package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestFilesActAsUser: the files API acts as the user it names, through
// the real server and a gVisor sandbox, and the sandbox's kernel decides:
// as the default user, /etc/shadow cannot be read nor /etc written by
// files read and write, archive (sandbox cp) in and out, or MCP, exactly
// as `exec cat /etc/shadow` is refused; each refusal is 403 forbidden.
// With ?user=root all of it works, and what root makes is root's.
func TestFilesActAsUser(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)
	sb := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 600})
	id := sb.ID
	base := "/v1/sandboxes/" + id

	if out := mustExec(t, c, id, "cat /etc/shadow >/dev/null 2>&1; echo $?"); out == "0\n" {
		t.Fatalf("exec cat /etc/shadow as the user succeeded: the image's shadow is readable, the test proves nothing")
	}

	do := func(method, path string, body io.Reader, ctype string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, s.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.Key)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	oneFileTar := func(name, body string) *bytes.Buffer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		io.WriteString(tw, body)
		tw.Close()
		return &buf
	}
	q := func(p string) string { return "?path=" + url.QueryEscape(p) }
	const octet, tarType = "application/octet-stream", "application/x-tar"

	for _, user := range []string{"", "&user=user"} {
		for _, r := range []struct {
			method, path string
			body         io.Reader
			ctype        string
		}{
			{"GET", "/files" + q("/etc/shadow"), nil, ""},
			{"GET", "/archive" + q("/etc/shadow"), nil, ""},
			{"PUT", "/files" + q("/etc/api-user.txt"), strings.NewReader("x"), octet},
			{"PUT", "/archive" + q("/etc"), oneFileTar("api-user-tar.txt", "x"), tarType},
			{"POST", "/files/mkdir" + q("/etc/api-user-dir"), nil, ""},
			{"DELETE", "/files" + q("/etc/hostname"), nil, ""},
			{"GET", "/files/list" + q("/root"), nil, ""},
		} {
			status, b := do(r.method, base+r.path+user, r.body, r.ctype)
			if status != http.StatusForbidden || errorCode(b) != "forbidden" {
				t.Errorf("%s %s%s as the user: got %d %s, want 403 forbidden", r.method, r.path, user, status, b)
			}
		}
	}
	if out := mustExec(t, c, id, "ls -d /etc/api-user.txt /etc/api-user-tar.txt /etc/api-user-dir 2>/dev/null; test -f /etc/hostname && echo kept"); out != "kept\n" {
		t.Errorf("after the refused requests /etc holds %q, want nothing new and /etc/hostname kept", out)
	}

	// sandbox cp, both ways, as the default user.
	env := s.Env()
	work := t.TempDir()
	local := filepath.Join(work, "f.txt")
	if err := os.WriteFile(local, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli(t, env, "sandbox", "cp", local, id+":/etc/f.txt"); code == 0 || !strings.Contains(errs, "forbidden") {
		t.Errorf("cp f.txt ID:/etc/f.txt: exit %d stdout %q stderr %q, want a forbidden failure", code, out, errs)
	}
	tree := filepath.Join(work, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "sub", "g.txt"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli(t, env, "sandbox", "cp", tree, id+":/etc/tree"); code == 0 || !strings.Contains(errs, "forbidden") {
		t.Errorf("cp tree ID:/etc/tree: exit %d stdout %q stderr %q, want a forbidden failure", code, out, errs)
	}
	if out, errs, code := cli(t, env, "sandbox", "cp", id+":/etc/shadow", work+"/"); code == 0 || !strings.Contains(errs, "forbidden") {
		t.Errorf("cp ID:/etc/shadow .: exit %d stdout %q stderr %q, want a forbidden failure", code, out, errs)
	}
	if _, err := os.Lstat(filepath.Join(work, "shadow")); err == nil {
		t.Error("cp ID:/etc/shadow left a local file")
	}
	if out := mustExec(t, c, id, "ls -d /etc/f.txt /etc/tree 2>/dev/null; echo end"); out != "end\n" {
		t.Errorf("after the refused copies /etc holds %q, want neither", out)
	}
	// Where the user may write, cp still works, and the files are its own.
	if out, errs, code := cli(t, env, "sandbox", "cp", tree, id+":/home/user/tree"); code != 0 {
		t.Errorf("cp tree ID:/home/user/tree: exit %d stdout %q stderr %q", code, out, errs)
	}
	if out := mustExec(t, c, id, "stat -c %U:%G /home/user/tree /home/user/tree/sub/g.txt"); out != "user:user\nuser:user\n" {
		t.Errorf("the user's copy is owned by %q, want user:user", out)
	}

	// cp --user root may write /etc and read /etc/shadow; --user bogus is a
	// usage error.
	if out, errs, code := cli(t, env, "sandbox", "cp", "--user", "root", local, id+":/etc/f.txt"); code != 0 {
		t.Errorf("cp --user root f.txt ID:/etc/f.txt: exit %d stdout %q stderr %q", code, out, errs)
	}
	if out := mustExec(t, c, id, "stat -c %U:%G /etc/f.txt"); out != "root:root\n" {
		t.Errorf("root's copy is owned by %q, want root:root", out)
	}
	if out, errs, code := cli(t, env, "sandbox", "cp", "-u", "root", id+":/etc/shadow", work+"/"); code != 0 {
		t.Errorf("cp -u root ID:/etc/shadow: exit %d stdout %q stderr %q", code, out, errs)
	} else if b, _ := os.ReadFile(filepath.Join(work, "shadow")); !bytes.HasPrefix(b, []byte("root:")) {
		t.Errorf("cp -u root ID:/etc/shadow wrote %.20q", b)
	}
	if _, errs, code := cli(t, env, "sandbox", "cp", "--user", "admin", local, id+":/tmp/x"); code != 2 || !strings.Contains(errs, "--user") {
		t.Errorf("cp --user admin: exit %d stderr %q, want a usage error (2)", code, errs)
	}

	// MCP's file tools act as the default user too.
	cs := mcpConnect(t, mcpHTTP(s, s.Key))
	for tool, args := range map[string]map[string]any{
		"sandbox_read_file":  {"sandbox_id": id, "path": "/etc/shadow"},
		"sandbox_write_file": {"sandbox_id": id, "path": "/etc/mcp.txt", "content": "x"},
	} {
		res, text, _ := mcpCall(t, cs, tool, args)
		if !res.IsError || !strings.HasPrefix(text, "forbidden: ") {
			t.Errorf("MCP %s: got %v %q, want a forbidden tool error", tool, res.IsError, text)
		}
	}

	// Root, when asked, may do all of it.
	const asRoot = "&user=root"
	if status, b := do("GET", base+"/files"+q("/etc/shadow")+asRoot, nil, ""); status != http.StatusOK || !bytes.HasPrefix(b, []byte("root:")) {
		t.Errorf("reading /etc/shadow as root: got %d %.40q", status, b)
	}
	if status, b := do("GET", base+"/archive"+q("/etc/shadow")+asRoot, nil, ""); status != http.StatusOK || !bytes.Contains(b, []byte("root:")) {
		t.Errorf("archive of /etc/shadow as root: got %d", status)
	}
	for _, r := range []struct {
		method, path string
		body         io.Reader
		ctype        string
	}{
		{"PUT", "/files" + q("/etc/api-root.txt"), strings.NewReader("r"), octet},
		{"PUT", "/archive" + q("/etc"), oneFileTar("api-root-tar.txt", "r"), tarType},
		{"POST", "/files/mkdir" + q("/etc/api-root-dir"), nil, ""},
		{"GET", "/files/list" + q("/root"), nil, ""},
	} {
		if status, b := do(r.method, base+r.path+asRoot, r.body, r.ctype); status != http.StatusOK {
			t.Errorf("%s %s as root: got %d %s, want 200", r.method, r.path, status, b)
		}
	}
	if out := mustExec(t, c, id, "stat -c %U:%G /etc/api-root.txt /etc/api-root-tar.txt /etc/api-root-dir"); out != "root:root\nroot:root\nroot:root\n" {
		t.Errorf("root's files are owned by %q, want root:root", out)
	}
	// The user may read root's 0644 file, not replace it.
	if status, b := do("GET", base+"/files"+q("/etc/api-root.txt"), nil, ""); status != http.StatusOK || string(b) != "r" {
		t.Errorf("the user reading root's 0644 file: got %d %q", status, b)
	}
	if status, b := do("PUT", base+"/files"+q("/etc/api-root.txt"), strings.NewReader("u"), octet); status != http.StatusForbidden {
		t.Errorf("the user replacing root's file: got %d %s, want 403", status, b)
	}
	if status, b := do("DELETE", base+"/files"+q("/etc/api-root.txt")+asRoot, nil, ""); status != http.StatusNoContent {
		t.Errorf("root removing its file: got %d %s", status, b)
	}
}

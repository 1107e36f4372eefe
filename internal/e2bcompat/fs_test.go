package e2bcompat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/withruntime/withruntime/api"
)

func TestResolvePath(t *testing.T) {
	for _, c := range []struct{ user, in, want string }{
		{"user", "", "/home/user"},
		{"user", "~", "/home/user"},
		{"user", "a.txt", "/home/user/a.txt"},
		{"user", "./d/../a.txt", "/home/user/a.txt"},
		{"user", "~/x/y", "/home/user/x/y"},
		{"user", "/etc/hosts", "/etc/hosts"},
		{"user", "/tmp/x/", "/tmp/x"},
		{"user", "../../../etc", "/etc"},
		{"root", "a.txt", "/root/a.txt"},
		{"root", "~", "/root"},
		{"root", "/home/user/a", "/home/user/a"},
	} {
		if got := resolvePath(c.user, c.in); got != c.want {
			t.Errorf("resolvePath(%q, %q): got %q, want %q", c.user, c.in, got, c.want)
		}
	}
}

func TestEntryInfo(t *testing.T) {
	mt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		fi         api.FileInfo
		typ, perms string
	}{
		{api.FileInfo{Name: "a", Path: "/home/user/a", Type: "file", Size: 1 << 40, Mode: 0o644, ModTime: mt}, "FILE_TYPE_FILE", "-rw-r--r--"},
		{api.FileInfo{Name: "d", Path: "/home/user/d", Type: "dir", Mode: 0o755, ModTime: mt}, "FILE_TYPE_DIRECTORY", "drwxr-xr-x"},
		{api.FileInfo{Name: "l", Path: "/home/user/l", Type: "symlink", Mode: 0o777, ModTime: mt, Target: "a"}, "FILE_TYPE_SYMLINK", "Lrwxrwxrwx"},
		{api.FileInfo{Name: "tmp", Path: "/tmp", Type: "dir", Mode: 0o1777, ModTime: mt}, "FILE_TYPE_DIRECTORY", "dtrwxrwxrwx"},
		{api.FileInfo{Name: "p", Path: "/run/p", Type: "other", Mode: 0o600, ModTime: mt}, "FILE_TYPE_UNSPECIFIED", "?rw-------"},
	} {
		b, err := protojson.Marshal(entryInfo(c.fi, "user"))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		json.Unmarshal(b, &got)
		wantType := any(c.typ)
		if c.typ == "FILE_TYPE_UNSPECIFIED" {
			wantType = nil // proto3 JSON leaves the zero enum out; clients skip it
		}
		if got["type"] != wantType {
			t.Errorf("%s: type: got %v, want %v", c.fi.Name, got["type"], wantType)
		}
		if got["permissions"] != c.perms {
			t.Errorf("%s: permissions: got %v, want %s", c.fi.Name, got["permissions"], c.perms)
		}
		if got["name"] != c.fi.Name || got["path"] != c.fi.Path || got["owner"] != "user" || got["group"] != "user" {
			t.Errorf("%s: got %s", c.fi.Name, b)
		}
		if got["modifiedTime"] != "2026-01-02T03:04:05Z" {
			t.Errorf("%s: modifiedTime: got %v, want 2026-01-02T03:04:05Z", c.fi.Name, got["modifiedTime"])
		}
		// int64 is a string in proto3 JSON: what both clients parse.
		if c.fi.Size != 0 && got["size"] != "1099511627776" {
			t.Errorf("%s: size: got %#v, want \"1099511627776\"", c.fi.Name, got["size"])
		}
		if c.fi.Type == "symlink" && (got["symlinkTarget"] != "a" || got["isSymlink"] != true) {
			t.Errorf("%s: symlink: got %s", c.fi.Name, b)
		}
		if c.fi.Type != "symlink" && got["symlinkTarget"] != nil {
			t.Errorf("%s: symlinkTarget on a non-link: got %s", c.fi.Name, b)
		}
	}
}

// listingOf is a listing of entries by relative name.
func listingOf(m map[string]api.FileInfo) *listing {
	l := &listing{}
	for name, fi := range m {
		l.names = append(l.names, name)
		l.infos = append(l.infos, fi)
	}
	return l
}

func mustSnapshot(t *testing.T, l *listing) snapshot {
	t.Helper()
	s, err := l.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChanges(t *testing.T) {
	t0, t1 := time.Unix(100, 0), time.Unix(200, 0)
	old := mustSnapshot(t, listingOf(map[string]api.FileInfo{
		"same":     {Type: "file", Size: 1, ModTime: t0, Mode: 0o644},
		"grown":    {Type: "file", Size: 1, ModTime: t0, Mode: 0o644},
		"touched":  {Type: "file", Size: 1, ModTime: t0, Mode: 0o644},
		"relinked": {Type: "symlink", Target: "a", ModTime: t0},
		"chmodded": {Type: "file", Size: 1, ModTime: t0, Mode: 0o644},
		"gone":     {Type: "file", Size: 1, ModTime: t0},
		"swapped":  {Type: "file", Size: 1, ModTime: t0},
		"filled":   {Type: "dir", Size: 1, ModTime: t0, Mode: 0o755},
	}))
	l := listingOf(map[string]api.FileInfo{
		"same":     {Type: "file", Size: 1, ModTime: t0, Mode: 0o644},
		"grown":    {Type: "file", Size: 9, ModTime: t0, Mode: 0o644},
		"touched":  {Type: "file", Size: 1, ModTime: t1, Mode: 0o644},
		"relinked": {Type: "symlink", Target: "b", ModTime: t0},
		"chmodded": {Type: "file", Size: 1, ModTime: t0, Mode: 0o600},
		"new/f":    {Type: "file", Name: "f", Path: "/w/new/f"},
		"new/g":    {Type: "file", Name: "g", Path: "/w/new/g", Size: 3},
		"new/dir":  {Type: "dir", Name: "dir", Path: "/w/new/dir"},
		"swapped":  {Type: "dir", ModTime: t0},
		"filled":   {Type: "dir", Size: 2, ModTime: t1, Mode: 0o755},
	})
	cur := mustSnapshot(t, l)
	var got []string
	for _, ev := range changes(old, cur, l, false, "user") {
		got = append(got, ev.Type.String()+" "+ev.Name)
	}
	// A new file counts as envd counts an upload's events: create, chmod
	// and, with content, write; a new directory is a create.
	want := "EVENT_TYPE_CHMOD chmodded,EVENT_TYPE_REMOVE gone,EVENT_TYPE_WRITE grown,EVENT_TYPE_CREATE new/dir," +
		"EVENT_TYPE_CREATE new/f,EVENT_TYPE_CHMOD new/f," +
		"EVENT_TYPE_CREATE new/g,EVENT_TYPE_CHMOD new/g,EVENT_TYPE_WRITE new/g," +
		"EVENT_TYPE_WRITE relinked,EVENT_TYPE_REMOVE swapped,EVENT_TYPE_CREATE swapped,EVENT_TYPE_WRITE touched"
	if strings.Join(got, ",") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ","), want)
	}
	evs := changes(snapshot{}, cur, l, true, "user")
	for _, ev := range evs {
		if ev.Entry == nil {
			t.Errorf("%s: include_entry: got no entry", ev.Name)
		}
	}
}

func TestKeepaliveEvery(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 50 * time.Second, "50": 50 * time.Second, "0": 50 * time.Second,
		"x": 50 * time.Second, "2": 2 * time.Second, "100000": 5 * time.Minute} {
		h := http.Header{}
		if in != "" {
			h.Set("Keepalive-Ping-Interval", in)
		}
		if got := keepaliveEvery(h); got != want {
			t.Errorf("Keepalive-Ping-Interval %q: got %v, want %v", in, got, want)
		}
	}
}

// watcherOf is a watcher made by acct in sandbox box, holding bytes.
func watcherOf(acct, box string, bytes int64) *watcher {
	return &watcher{sb: &Sandbox{ID: box, acct: acct}, snap: snapshot{bytes: bytes}}
}

func TestWatchersBounds(t *testing.T) {
	ws := newWatchers()
	now := time.Unix(1000, 0)
	ws.now = func() time.Time { return now }
	var ids []string
	for i := 0; i < maxWatchesPerSandbox-1; i++ {
		id, err := ws.add(watcherOf("k1", "a", 100))
		if err != nil {
			t.Fatalf("watcher %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	st, err := ws.hold("k1", "a", 100)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if _, err := ws.add(watcherOf("k1", "a", 100)); err == nil {
		t.Errorf("watch %d of one sandbox: got no error, want too many", maxWatchesPerSandbox+1)
	}
	if _, err := ws.add(watcherOf("k1", "b", 100)); err != nil {
		t.Errorf("another sandbox's first watcher: got %v, want none", err)
	}
	if ws.get("b", ids[0]) != nil {
		t.Errorf("sandbox b got sandbox a's watcher")
	}
	st.release()
	if _, err := ws.add(watcherOf("k1", "a", 100)); err != nil {
		t.Errorf("after a stream ended: got %v, want room", err)
	}
	if !ws.remove("a", ids[0]) || ws.remove("a", ids[0]) {
		t.Errorf("remove: want true once, then false")
	}
	ws.sweep.Stop()
	now = now.Add(watcherIdle + time.Second)
	ws.get("a", ids[1]) // used: stays
	ws.alive = func(*watcher) bool { return true }
	ws.sweepNow()
	if ws.get("a", ids[1]) == nil || ws.get("a", ids[2]) != nil {
		t.Errorf("idle cleanup: want the used watcher kept and the idle one dropped")
	}
	ws.alive = func(w *watcher) bool { return w.sb.ID != "a" }
	ws.sweepNow()
	if ws.get("a", ids[1]) != nil || ws.box["a"] != nil {
		t.Errorf("a sandbox that ended: got its watcher kept, want it dropped")
	}
	if ws.sweep != nil {
		ws.sweep.Stop()
	}
}

// TestWatchersShare: the watches of one account are bounded in number and
// bytes across its sandboxes, and accounts filling the server leave room
// for one with few watches.
func TestWatchersShare(t *testing.T) {
	ws := newWatchers()
	defer func() {
		if ws.sweep != nil {
			ws.sweep.Stop()
		}
	}()
	for i := range maxWatchesPerAccount {
		if _, err := ws.add(watcherOf("k1", fmt.Sprint("s", i), 1)); err != nil {
			t.Fatalf("watcher %d of one account: %v", i, err)
		}
	}
	if _, err := ws.add(watcherOf("k1", "other", 1)); err == nil {
		t.Errorf("watcher %d of one account: got room, want too many", maxWatchesPerAccount+1)
	}
	if _, err := ws.add(watcherOf("k2", "big", maxAccountWatchBytes+1)); err == nil {
		t.Errorf("a watcher over the account's bytes: got room, want refused")
	}
	for i := range maxWatchesPerAccount / 4 {
		if _, err := ws.add(watcherOf("k2", fmt.Sprint("u", i), 1)); err != nil {
			t.Fatalf("watcher %d of account k2: %v", i, err)
		}
	}
	// Accounts with many watches each fill the server's shared room.
	acct := 3
	for ws.all.n < maxWatches*3/4 {
		for i := range maxWatchesPerAccount {
			if _, err := ws.add(watcherOf(fmt.Sprint("k", acct), fmt.Sprint("t", acct, "-", i), 1)); err != nil {
				break
			}
		}
		acct++
	}
	if _, err := ws.add(watcherOf("k1000", "big", 1)); err != nil {
		t.Errorf("a new account's first watcher on a busy server: got %v, want room", err)
	}
	if _, err := ws.add(watcherOf("k2", "more", 1)); err == nil {
		t.Errorf("an account with %d watches on a busy server: got room, want refused", maxWatchesPerAccount/4)
	}
}

// rpc calls an envd Connect method with the JSON codec, as E2B's clients
// do, and returns the status and the decoded body.
func rpc(t *testing.T, s *Server, mk func(string, string, []byte, ...string) *http.Request, method, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	r := mk("POST", "/filesystem.Filesystem/"+method, []byte(body), append([]string{"Content-Type", "application/json", "Connect-Protocol-Version", "1"}, hdr...)...)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: body %q: %v", method, w.Body.String(), err)
	}
	return w.Code, out
}

func TestFilesystemRPCs(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	ff.files["/home/user/a.txt"] = []byte("hello")
	ff.files["/home/user/d"] = nil
	ff.files["/home/user/d/e"] = nil
	ff.files["/home/user/d/e/f.txt"] = []byte("x")

	code, out := rpc(t, s, mk, "Stat", `{"path":"a.txt"}`)
	entry, _ := out["entry"].(map[string]any)
	if code != 200 || entry["path"] != "/home/user/a.txt" || entry["size"] != "5" || entry["type"] != "FILE_TYPE_FILE" {
		t.Errorf("Stat a.txt: got %d %v", code, out)
	}
	code, out = rpc(t, s, mk, "Stat", `{"path":"missing"}`)
	if code != 404 || out["code"] != "not_found" {
		t.Errorf("Stat missing: got %d %v, want 404 not_found", code, out)
	}
	code, out = rpc(t, s, mk, "MakeDir", `{"path":"new/sub"}`)
	if entry, _ := out["entry"].(map[string]any); code != 200 || entry["path"] != "/home/user/new/sub" || !ff.isDir("/home/user/new/sub") {
		t.Errorf("MakeDir new/sub: got %d %v", code, out)
	}
	code, out = rpc(t, s, mk, "MakeDir", `{"path":"new/sub"}`)
	if code != 409 || out["code"] != "already_exists" {
		t.Errorf("MakeDir again: got %d %v, want 409 already_exists", code, out)
	}
	code, out = rpc(t, s, mk, "ListDir", `{"path":"d","depth":2}`)
	var paths []string
	for _, e := range out["entries"].([]any) {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	if code != 200 || strings.Join(paths, ",") != "/home/user/d/e,/home/user/d/e/f.txt" {
		t.Errorf("ListDir d depth 2: got %d %v", code, paths)
	}
	code, out = rpc(t, s, mk, "ListDir", `{"path":"d"}`)
	if n := len(out["entries"].([]any)); code != 200 || n != 1 {
		t.Errorf("ListDir d depth 1: got %d, %d entries, want 1", code, n)
	}
	code, out = rpc(t, s, mk, "ListDir", `{"path":"nowhere"}`)
	if code != 404 || out["code"] != "not_found" {
		t.Errorf("ListDir missing: got %d %v, want 404 not_found", code, out)
	}
	code, out = rpc(t, s, mk, "Remove", `{"path":"d"}`)
	if _, still := ff.files["/home/user/d/e/f.txt"]; code != 200 || still {
		t.Errorf("Remove d: got %d %v, want the tree gone", code, out)
	}
	// As E2B's daemon does, removing what is not there succeeds.
	code, out = rpc(t, s, mk, "Remove", `{"path":"d"}`)
	if code != 200 {
		t.Errorf("Remove again: got %d %v, want 200", code, out)
	}

	// The polled watcher sees what changed between two calls.
	code, out = rpc(t, s, mk, "CreateWatcher", `{"path":"new"}`)
	wid, _ := out["watcherId"].(string)
	if code != 200 || wid == "" {
		t.Fatalf("CreateWatcher: got %d %v", code, out)
	}
	ff.files["/home/user/new/w.txt"] = []byte("1")
	code, out = rpc(t, s, mk, "GetWatcherEvents", `{"watcherId":"`+wid+`"}`)
	evs, _ := json.Marshal(out["events"])
	if code != 200 || string(evs) != `[{"name":"w.txt","type":"EVENT_TYPE_CREATE"},{"name":"w.txt","type":"EVENT_TYPE_CHMOD"},{"name":"w.txt","type":"EVENT_TYPE_WRITE"}]` {
		t.Errorf("GetWatcherEvents: got %d %s", code, evs)
	}
	if code, _ = rpc(t, s, mk, "RemoveWatcher", `{"watcherId":"`+wid+`"}`); code != 200 {
		t.Errorf("RemoveWatcher: got %d", code)
	}
	code, out = rpc(t, s, mk, "GetWatcherEvents", `{"watcherId":"`+wid+`"}`)
	if code != 404 || out["code"] != "not_found" {
		t.Errorf("GetWatcherEvents after remove: got %d %v, want 404 not_found", code, out)
	}

	// As root (Authorization Basic "root:"): relative paths are under
	// /root, and the files API is called with user=root.
	root := "Basic " + base64.StdEncoding.EncodeToString([]byte("root:"))
	code, out = rpc(t, s, mk, "MakeDir", `{"path":"rootdir"}`, "Authorization", root)
	if entry, _ := out["entry"].(map[string]any); code != 200 || entry["path"] != "/root/rootdir" || entry["owner"] != "root" {
		t.Errorf("MakeDir as root: got %d %v, want /root/rootdir owned by root", code, out)
	}
	if got := ff.users["/root/rootdir"]; got != "root" {
		t.Errorf("MakeDir as root: the files API got user=%q, want root", got)
	}
	code, _ = rpc(t, s, mk, "Stat", `{"path":"/home/user/a.txt"}`)
	if got := ff.users["/home/user/a.txt"]; code != 200 || got != "" {
		t.Errorf("Stat as the default user: got %d, user=%q, want 200 and no user", code, got)
	}
}

func TestSortWalk(t *testing.T) {
	var in []api.FileInfo
	for _, p := range []string{"/d/b", "/d/a-b", "/d/a", "/d/0.txt", "/d/a/y", "/d/a/x", "/d/b/z"} {
		in = append(in, api.FileInfo{Path: p})
	}
	sortWalk(in)
	var got []string
	for _, fi := range in {
		got = append(got, fi.Path)
	}
	if want := "/d/0.txt,/d/a,/d/a/x,/d/a/y,/d/a-b,/d/b,/d/b/z"; strings.Join(got, ",") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestLinkTarget(t *testing.T) {
	for _, c := range [][3]string{
		{"/home/user/l", "a.txt", "/home/user/a.txt"},
		{"/home/user/d/l", "../a", "/home/user/a"},
		{"/home/user/l", "/etc//hosts", "/etc/hosts"},
	} {
		if got := linkTarget(c[0], c[1]); got != c[2] {
			t.Errorf("linkTarget(%q, %q): got %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

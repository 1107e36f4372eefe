package agent

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
)

// needAttrs skips where the test's own filesystem keeps no user
// extended attributes: the feature cannot be tried there.
func needAttrs(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, ".attr-probe")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	if err := unix.Setxattr(p, "user.probe", []byte("1"), 0); errors.Is(err, syscall.ENOTSUP) {
		t.Skipf("%s keeps no user extended attributes", dir)
	} else if err != nil {
		t.Fatal(err)
	}
}

func TestWriteAttrs(t *testing.T) {
	a := newTestAgent(t)
	ws := a.cfg.Workspace
	needAttrs(t, ws)
	want := map[string]string{"e2b.author": "mish", "e2b.eq": "a=b c"}
	qs := q("d/f.txt") + "&attr=" + url.QueryEscape("e2b.author=mish") + "&attr=" + url.QueryEscape("e2b.eq=a=b c") +
		"&attr=" + url.QueryEscape("e2b.author=second")
	var info api.FileInfo
	a.doJSON("PUT", "/files"+qs, strings.NewReader("x"), http.StatusOK, &info)
	if !reflect.DeepEqual(info.Attrs, want) {
		t.Fatalf("write answered attrs %v, want %v (a repeated name keeps its first value)", info.Attrs, want)
	}
	a.doJSON("GET", "/files/stat"+q("d/f.txt"), nil, http.StatusOK, &info)
	if !reflect.DeepEqual(info.Attrs, want) {
		t.Errorf("stat: got attrs %v, want %v", info.Attrs, want)
	}
	var l api.FileList
	a.doJSON("GET", "/files/list"+q("d"), nil, http.StatusOK, &l)
	if len(l.Entries) != 1 || !reflect.DeepEqual(l.Entries[0].Attrs, want) {
		t.Errorf("list: got %+v, want one entry with attrs %v", l.Entries, want)
	}

	// Set in the sandbox: user-namespace text shows, a value that is not
	// text and other namespaces do not.
	p := filepath.Join(ws, "d/f.txt")
	for name, v := range map[string]string{"user.plain": "v", "user.bin": "\xff\xfe"} {
		if err := unix.Setxattr(p, name, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		if err := unix.Setxattr(p, "trusted.hidden", []byte("h"), 0); err != nil {
			t.Fatal(err)
		}
	}
	a.doJSON("GET", "/files/stat"+q("d/f.txt"), nil, http.StatusOK, &info)
	want["plain"] = "v"
	if !reflect.DeepEqual(info.Attrs, want) {
		t.Errorf("stat: got attrs %v, want %v", info.Attrs, want)
	}

	// A write replaces the file: without attrs it has none.
	var over api.FileInfo
	a.doJSON("PUT", "/files"+q("d/f.txt"), strings.NewReader("y"), http.StatusOK, &over)
	if over.Attrs != nil {
		t.Errorf("overwrite: got attrs %v, want none", over.Attrs)
	}
}

func TestWriteAttrsRefused(t *testing.T) {
	a := newTestAgent(t)
	for _, attr := range []string{
		"novalue",
		"=v",
		"k=line\nbreak",
		"sp ace=v",
		"k=\xc3\xa9",
		strings.Repeat("n", 251) + "=v",
		"k=" + strings.Repeat("v", api.MaxFileAttrBytes),
	} {
		msg := a.wantError("PUT", "/files"+q("bad.txt")+"&attr="+url.QueryEscape(attr), strings.NewReader("x"), http.StatusBadRequest, "invalid_request")
		if !strings.Contains(msg, "attr") {
			t.Errorf("attr %.20q: message %q names no attr", attr, msg)
		}
	}
	if _, err := os.Stat(filepath.Join(a.cfg.Workspace, "bad.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused write left a file: %v", err)
	}
	// Exactly the bound passes the check (names counted with "user.").
	fit := url.Values{"attr": {"a=" + strings.Repeat("v", api.MaxFileAttrBytes/2-len("user.a")), "b=" + strings.Repeat("v", api.MaxFileAttrBytes/2-len("user.b"))}}
	r := &http.Request{URL: &url.URL{RawQuery: fit.Encode()}}
	if got, err := attrParams(r); err != nil || len(got) != 2 {
		t.Errorf("got %d attrs, %v at exactly %d bytes, want both", len(got), err, api.MaxFileAttrBytes)
	}
	fit["attr"] = append(fit["attr"], "c=")
	r.URL.RawQuery = fit.Encode()
	if _, err := attrParams(r); err == nil {
		t.Errorf("one byte over the bound was taken")
	}
}

func TestStatOwnerGroup(t *testing.T) {
	a := newTestAgent(t)
	var info api.FileInfo
	a.doJSON("PUT", "/files"+q("o.txt"), strings.NewReader("x"), http.StatusOK, &info)
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		t.Skip("the test's own user has no name:", err)
	}
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skip("the test's own group has no name:", err)
	}
	if info.Owner != u.Username || info.Group != g.Name {
		t.Errorf("got owner %q group %q, want %q %q", info.Owner, info.Group, u.Username, g.Name)
	}
}

func TestReadIDNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "passwd")
	body := "root:x:0:0:root:/root:/bin/bash\n" +
		"broken line\n" +
		":x:5:5::/:/bin/sh\n" +
		"user:x:1000:1000::/home/user:/bin/bash\n" +
		"alias:x:1000:1000::/:/bin/sh\n" +
		"bad:x:notanumber:1::/:/bin/sh\n" +
		"big:x:4294967296:1::/:/bin/sh\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[uint32]string{0: "root", 1000: "user"}
	if got := readIDNames(p); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := readIDNames(filepath.Join(t.TempDir(), "none")); len(got) != 0 {
		t.Errorf("a missing file named %v, want nothing", got)
	}
	// Only the first maxAccountsFile bytes are read.
	pad := strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", maxAccountsFile/1000+1)
	if err := os.WriteFile(p, []byte(pad+"late:x:7:7::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readIDNames(p); len(got) != 0 {
		t.Errorf("got %v past the bound, want nothing", got)
	}
}

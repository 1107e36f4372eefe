package network

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestLinks: a link is kept in the sandbox's state dir, a new Links (a
// restarted server) adopts it from there, and Detach removes the link and
// the file; a nil Links is a backend without network.
func TestLinks(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPool(t))
	ns := filepath.Join(t.TempDir(), "ns")
	if err := NewNamespace(ns); err != nil {
		t.Fatal(err)
	}
	defer RemoveNamespace(ns)
	dir := t.TempDir()
	ls := NewLinks(r.p)
	l, err := ls.Attach("kept", ns, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadLink(dir); err != nil || got != l {
		t.Fatalf("kept link: got %+v, %v; want %+v", got, err, l)
	}
	restarted := NewLinks(r.p)
	if err := restarted.Adopt("kept", dir); err != nil {
		t.Fatal(err)
	}
	if addr, ok := restarted.Addr("kept"); !ok || addr != l.SandboxAddr {
		t.Fatalf("adopted address: got %s %v, want %s", addr, ok, l.SandboxAddr)
	}
	if err := restarted.SetOnline("kept", true); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Adopt("none", t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("adopting a sandbox without a link: got %v, want not exist", err)
	}
	if err := restarted.Detach("kept", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(l.HostIf); err == nil {
		t.Errorf("%s is still there after Detach", l.HostIf)
	}
	if _, err := ReadLink(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link file is still there: %v", err)
	}
	var none *Links
	if none.Len() != 0 || none.Adopt("x", dir) != nil || none.Detach("x", dir) != nil {
		t.Error("a nil Links did something")
	}
	if _, ok := none.Addr("x"); ok {
		t.Error("a nil Links found an address")
	}
}

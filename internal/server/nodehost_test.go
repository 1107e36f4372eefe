package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// One daemon per data dir: a second lock fails at once and says why, the
// lock is not inherited by what the node starts, and it is free again once
// released.
func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	f, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("got descriptor flags %#x %v, want close-on-exec", flags, err)
	}
	if g, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "another withruntime node runs on data dir") {
		if g != nil {
			g.Close()
		}
		t.Fatalf("second lock: got %v, want another node's error", err)
	}
	f.Close()
	g, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	g.Close()
}

// A second node daemon on a data dir in use fails at once, before it
// touches the store (which here does not even answer).
func TestStartNodeRefusesADataDirInUse(t *testing.T) {
	dir := t.TempDir()
	f, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = StartNode(context.Background(), NodeConfig{
		Config: Config{Listen: "127.0.0.1:0", DataDir: dir, NoEgress: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Store:  "postgres://withruntime@127.0.0.1:1/withruntime?connect_timeout=1",
	})
	if err == nil || !strings.Contains(err.Error(), "another withruntime node runs on data dir") {
		t.Fatalf("got %v, want the data dir's lock refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.id")); err == nil {
		t.Fatal("the refused daemon made a node id")
	}
}

// The PostgreSQL driver's password variables are gone from the
// environment that runsc inherits.
func TestForgetStorePassword(t *testing.T) {
	t.Setenv("PGPASSWORD", "secret")
	t.Setenv("PGPASSFILE", "/etc/withruntime/pgpass")
	forgetStorePassword()
	for _, k := range storePasswordEnv {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("got %s=%q, want it unset", k, v)
		}
	}
}

func TestStoreHosts(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://u:p@db.example:5432/wr", "db.example"},
		{"postgresql://u:p@198.18.0.5,db2.example:5433/wr?sslmode=require", "198.18.0.5 db2.example"},
		{"postgres://u:p@[2001:db8::5]:5432/wr", "2001:db8::5"},
		{"postgres:///wr?host=/var/run/postgresql", ""},
		{"postgres://u@/wr?host=db3.example&hostaddr=198.18.0.9", "db3.example 198.18.0.9"},
	} {
		if got := strings.Join(storeHosts(tc.url), " "); got != tc.want {
			t.Errorf("storeHosts(%q): got %q, want %q", tc.url, got, tc.want)
		}
	}
}

// A sandbox's egress never reaches the store or another node, although
// --egress-permit opens the range they are in (the proxy's real
// configuration, as a node builds it); the rest of the range stays open.
func TestNodeBlocksTheInstallation(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &egressServices{log: egress.NewLog(), failed: make(chan error, 2), stopped: make(chan struct{})}
	t.Cleanup(e.close)
	var err error
	if e.tcp, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if e.dnsTCP, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if e.dnsUDP, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	permit := netip.MustParsePrefix("198.18.0.0/15")
	if err := e.serve(Config{Logger: log, EgressPermit: []netip.Prefix{permit}}, noSandboxes{}, nil); err != nil {
		t.Fatal(err)
	}
	list := e.proxy.Load().Blocklist()

	st := storetest.OpenBolt(t)
	defer st.Close()
	for _, n := range []store.Node{{ID: "nodeaaaaaaaa", Addr: "198.18.0.7:7879"}, {ID: "nodebbbbbbbb", Addr: "node-b.example:7879"}} {
		if err := st.RegisterNode(ctx, &n, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	names := map[string][]netip.Addr{
		"db2.example":    {netip.MustParseAddr("198.18.0.6")},
		"node-b.example": {netip.MustParseAddr("198.18.0.8"), netip.MustParseAddr("2001:db8::8")},
	}
	b := &installationBlock{
		list: list, store: "postgres://u:p@198.18.0.5:5432,db2.example:5432/wr", self: "198.18.0.10:7879", st: st, logger: log,
		lookup: func(_ context.Context, host string) ([]netip.Addr, error) { return names[host], nil },
	}
	open := netip.MustParseAddr("198.18.0.99")
	if list.Blocked(open) || list.Blocked(netip.MustParseAddr("198.18.0.5")) {
		t.Fatal("the permit is not in effect: the test shows nothing")
	}
	b.refresh(ctx)
	for _, a := range []string{"198.18.0.5", "198.18.0.6", "198.18.0.7", "198.18.0.8", "2001:db8::8", "198.18.0.10", "::ffff:198.18.0.5"} {
		if !list.Blocked(netip.MustParseAddr(a)) {
			t.Errorf("%s (the store's, a node's) is not blocked", a)
		}
	}
	if list.Blocked(open) {
		t.Errorf("%s, in the permitted range and nobody's, is blocked", open)
	}

	// A node registered later is blocked at the next refresh.
	if err := st.RegisterNode(ctx, &store.Node{ID: "nodecccccccc", Addr: "198.18.0.11:7879"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	b.refresh(ctx)
	if !list.Blocked(netip.MustParseAddr("198.18.0.11")) || !list.Blocked(netip.MustParseAddr("198.18.0.5")) {
		t.Error("after a refresh: a new node's address is not blocked, or the store's is not any more")
	}
}

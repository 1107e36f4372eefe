package cluster

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// psqlFrom runs one query against the run's database from namespace ns,
// through the forwarder, as a node would reach the store.
func (r *rig) psqlFrom(ns, query string) (string, error) {
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, "--", "psql", "-XAtq", r.nodeDBURL, "-c", query)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=2")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestRig proves the rig itself, without the platform: every namespace
// reaches the run's own database through the forwarder, a cut node does
// not while its neighbours still do, healing gives it back, and the root
// namespace forwards nothing to or from the bridge.
func TestRig(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		need(t, "psql is not installed")
	}
	r := newBase(t)
	for _, n := range r.nodes {
		got, err := r.psqlFrom(n.ns, "select current_database()")
		if err != nil || !strings.HasPrefix(got, "wrc_"+r.tag) {
			t.Fatalf("from %s: got %q (%v), want the run's database wrc_%s...", n.ns, got, err, r.tag)
		}
	}
	r.cut(r.nodes[0])
	if got, err := r.psqlFrom(r.nodes[0].ns, "select 1"); err == nil {
		t.Fatalf("a cut node reached the store: %q", got)
	}
	if got, err := r.psqlFrom(r.nodes[1].ns, "select 1"); err != nil || got != "1" {
		t.Fatalf("a neighbour of the cut node: got %q (%v), want 1", got, err)
	}
	r.heal(r.nodes[0])
	if got, err := r.psqlFrom(r.nodes[0].ns, "select 1"); err != nil || got != "1" {
		t.Fatalf("a healed node: got %q (%v), want 1", got, err)
	}
	table := sh(t, "nft", "list", "table", "inet", r.bridge)
	for _, want := range []string{`iifname "` + r.bridge + `" drop`, `oifname "` + r.bridge + `" drop`} {
		if !strings.Contains(table, want) {
			t.Fatalf("the root's table lacks %q:\n%s", want, table)
		}
	}
}

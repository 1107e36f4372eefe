package server

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/withruntime/withruntime/internal/network"
)

func TestNetworkTag(t *testing.T) {
	tagDir = filepath.Join(t.TempDir(), "network-tags")
	defer func() { tagDir = "/run/withruntime/network-tags" }()
	tables, foreign := map[string]bool{}, map[string]bool{}
	hostTaken = func() taken {
		return taken{table: tables, vethIf: map[string]bool{}, foreignIf: foreign}
	}
	defer func() { hostTaken = takenTags }()
	removed := map[string]bool{}
	removeLeft = func(tag string) error { removed[tag] = true; return nil }
	defer func() { removeLeft = network.Remove }()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Two data dirs whose hashes start alike: the tag versions before
	// allocation derived was the same for both.
	root := t.TempDir()
	a := filepath.Join(root, "a")
	var b string
	for i := 0; ; i++ {
		b = filepath.Join(root, "b"+strconv.Itoa(i))
		if b != a && candidateTag(b, 0) == candidateTag(a, 0) {
			break
		}
	}
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tagA, err := networkTag(a, log)
	if err != nil {
		t.Fatal(err)
	}
	if tagA != candidateTag(a, 0) {
		t.Errorf("first data dir: got %s, want the derived %s (what its earlier servers used)", tagA, candidateTag(a, 0))
	}
	tagB, err := networkTag(b, log)
	if err != nil {
		t.Fatal(err)
	}
	if tagB == tagA || !validTag(tagB) {
		t.Errorf("colliding data dirs: got tags %s and %s, want two valid different ones", tagA, tagB)
	}
	for _, tc := range []struct{ dir, want string }{{a, tagA}, {b, tagB}} {
		if got, err := networkTag(tc.dir, log); err != nil || got != tc.want {
			t.Errorf("again for %s: got %s %v, want %s (kept)", tc.dir, got, err, tc.want)
		}
	}

	// An interface that is no veth (the host's "wlan0" for "lan") rules
	// out even the derived candidate; a table of that name (a server of
	// an older version) any later one.
	c := filepath.Join(root, "c")
	os.MkdirAll(c, 0o700)
	foreign[candidateTag(c, 0)] = true
	tables[candidateTag(c, 1)] = true
	tagC, err := networkTag(c, log)
	if err != nil {
		t.Fatal(err)
	}
	if tagC == tagA || tagC == tagB || tagC == candidateTag(c, 0) || tagC == candidateTag(c, 1) {
		t.Errorf("third data dir: got %s, want none of %s, %s (claimed), %s (an interface), %s (a table)", tagC, tagA, tagB, candidateTag(c, 0), candidateTag(c, 1))
	}

	// A claim whose data dir is gone is free again.
	os.RemoveAll(b)
	if got := claimant(tagB); got != "" {
		t.Errorf("the claim of a removed data dir: held by %q, want free", got)
	}

	// The next allocation removes the gone data dir's table and veths,
	// and its claim, and only those.
	if _, err := networkTag(a, log); err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || !removed[tagB] {
		t.Errorf("swept %v, want only %s (its data dir is gone)", removed, tagB)
	}
	if _, err := os.Stat(filepath.Join(tagDir, tagB)); !os.IsNotExist(err) {
		t.Errorf("the claim of the gone data dir: %v, want removed", err)
	}

	// A data dir whose kept tag another holds now (claims are lost at a
	// reboot) chooses another.
	os.MkdirAll(b, 0o700)
	os.WriteFile(filepath.Join(b, tagFile), []byte(tagA+"\n"), 0o600)
	if got, err := networkTag(b, log); err != nil || got == tagA || got == tagC {
		t.Errorf("a kept tag another data dir holds: got %s %v, want a new one", got, err)
	}
}

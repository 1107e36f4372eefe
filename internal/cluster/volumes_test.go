package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

func TestVolumePlacement(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	roomy := startNode(t, ca, st, "roomy") // the most free disk, once its load counts
	big := startNode(t, ca, st, "big")     // more disk, but most of it promised
	other := startNode(t, ca, st, "other")
	gone := startNode(t, ca, st, "gone") // the most disk of all, lost
	register(t, st, roomy, nodeOpts{diskMiB: 100 << 10, load: store.NodeLoad{DiskMiB: 10 << 10}})
	register(t, st, big, nodeOpts{diskMiB: 200 << 10, load: store.NodeLoad{DiskMiB: 150 << 10}})
	register(t, st, other, nodeOpts{diskMiB: 50 << 10})
	register(t, st, gone, nodeOpts{diskMiB: 900 << 10, ttl: 50 * time.Millisecond, lost: true})
	c := newControl(t, st, ca, nil, 0)
	ctx := t.Context()

	cl, err := c.VolumeHost(ctx)
	if err != nil || cl.Node() != "roomy" {
		t.Fatalf("a new volume's node: got %v, %v; want roomy (most free disk of the live nodes)", cl, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, v := range []store.Volume{
		{ID: "v1", Name: "a", Node: "roomy"}, {ID: "v2", Name: "b", Node: "roomy"},
		{ID: "v3", Name: "c", Node: "other"}, {ID: "v4", Name: "d", Node: "gone"},
	} {
		v.Account, v.SizeGiB, v.CreatedAt = "acct", 1, now
		if err := st.PutVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	mounts := func(names ...string) service.CreateRequest {
		var req service.CreateRequest
		for _, n := range names {
			req.Volumes = append(req.Volumes, sandbox.VolumeMount{Name: n, Path: "/" + n})
		}
		return req
	}
	// On the volumes' node, though others are emptier by CPU and memory.
	rec, err := c.Create(ctx, "acct", "key", mounts("a", "b"))
	if err != nil || rec.Node != "roomy" {
		t.Fatalf("create mounting a and b: got %+v, %v; want it on roomy", rec, err)
	}
	for _, tc := range []struct {
		names []string
		kind  sandbox.Kind
		says  string
	}{
		{[]string{"a", "c"}, sandbox.KindConflict, "different nodes"},
		{[]string{"d"}, sandbox.KindCapacityExhausted, "unavailable"},
		{[]string{"none"}, sandbox.KindNotFound, "not found"},
	} {
		_, err := c.Create(ctx, "acct", "key", mounts(tc.names...))
		if sandbox.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("create mounting %v: got %v, want %s: ...%s", tc.names, err, tc.kind, tc.says)
		}
	}
	if _, _, err := c.VolumeNode(ctx, "acct", "d"); sandbox.KindOf(err) != sandbox.KindCapacityExhausted || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("a lost node's volume: got %v, want capacity_exhausted: ...unavailable", err)
	}
	if _, _, err := c.VolumeNode(ctx, "other", "a"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("another account's volume: got %v, want not_found", err)
	}
	for n, want := range map[*fakeNode]int{roomy: 1, big: 0, other: 0, gone: 0} {
		if creates, _ := n.counts(); creates != want {
			t.Errorf("node %s was sent %d creates, want %d", n.id, creates, want)
		}
	}
}

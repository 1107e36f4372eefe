package cluster

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// volumeOnItsNode makes a volume through one API server (a second one,
// past the account's storage quota, is refused), writes it from
// a sandbox, reads it from another sandbox placed on the same node and
// through the other API server's files API; once the node is lost, the
// volume's calls and creates that mount it are refused (503
// capacity_exhausted, unavailable), never answered empty, and its files
// are back with the node.
func volumeOnItsNode(t *testing.T, r *rig) {
	key := r.account("volume", 0, 0)
	name := "data-" + r.tag
	vpath := "/v1/volumes/" + name
	if st, data := r.do(r.apis[0], key, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: name, SizeGiB: 1}); st != 201 {
		t.Fatalf("creating a volume through %s: %d %s", r.apis[0].name, st, data)
	}
	// The nodes hold the account to its storage quota, counted over every
	// node's volumes: 1 GiB held, 4 more is past it.
	if st, data := r.do(r.apis[1], key, "POST", "/v1/volumes", api.CreateVolumeRequest{Name: "big-" + r.tag, SizeGiB: nodeStorageQuotaGiB}); st != 403 || !strings.Contains(string(data), "storage quota") {
		t.Fatalf("a volume past the storage quota: %d %s, want 403", st, data)
	}
	mount := func(ro bool) string {
		return `{` + small + `,"volumes":[{"name":"` + name + `","path":"/data","read_only":` + map[bool]string{true: "true", false: "false"}[ro] + `}]}`
	}
	writer := r.mustCreate(r.apis[0], key, mount(false))
	if res := r.exec(r.apis[0], key, writer.ID, "echo hello > /data/f"); res.status != 200 || res.exit != 0 {
		t.Fatalf("writing the volume: %v", res)
	}
	reader := r.mustCreate(r.apis[1], key, mount(true))
	if reader.Node != writer.Node {
		t.Fatalf("a second sandbox mounting the volume is on %s, the volume's on %s", reader.Node, writer.Node)
	}
	if res := r.exec(r.apis[1], key, reader.ID, "cat /data/f"); res.status != 200 || res.stdout != "hello\n" {
		t.Fatalf("reading the volume from another sandbox: %v", res)
	}
	if st, data := r.do(r.apis[1], key, "GET", vpath+"/files?path=/f", nil); st != 200 || string(data) != "hello\n" {
		t.Fatalf("the files API through %s: %d %q", r.apis[1].name, st, data)
	}
	if st, data := r.do(r.apis[1], key, "PUT", vpath+"/files?path=/g", "from the api"); st != 204 {
		t.Fatalf("writing through the files API: %d %s", st, data)
	}
	if res := r.exec(r.apis[0], key, reader.ID, "cat /data/g"); res.stdout != "from the api" {
		t.Fatalf("a file the API wrote, in the sandbox: %v", res)
	}
	st, data := r.do(r.apis[1], key, "GET", vpath, nil)
	var v api.Volume
	json.Unmarshal(data, &v)
	if st != 200 || !slices.Contains(v.MountedBy, writer.ID) || !slices.Contains(v.MountedBy, reader.ID) || v.UsedBytes == 0 {
		t.Fatalf("the volume through %s: %d %s", r.apis[1].name, st, data)
	}
	// A read-only mount forks on the volume's node; a create from the
	// kept snapshot through the other API server mounts it again.
	st, data = r.do(r.apis[0], key, "POST", "/v1/sandboxes/"+reader.ID+"/fork", map[string]any{"count": 1, "keep_snapshot": true})
	var fork api.ForkResult
	if st != 201 || json.Unmarshal(data, &fork) != nil || len(fork.Sandboxes) != 1 || fork.Snapshot == nil {
		t.Fatalf("forking a sandbox with a read-only volume: %d %s", st, data)
	}
	copied := r.mustCreate(r.apis[1], key, `{"snapshot":"`+fork.Snapshot.ID+`"}`)
	for _, sb := range []api.Sandbox{fork.Sandboxes[0], copied} {
		if sb.Node != writer.Node || len(sb.Volumes) != 1 || !sb.Volumes[0].ReadOnly {
			t.Fatalf("a copy of the reader: on %s (the volume's %s), volumes %+v", sb.Node, writer.Node, sb.Volumes)
		}
		if res := r.exec(r.apis[1], key, sb.ID, "cat /data/f"); res.status != 200 || res.stdout != "hello\n" {
			t.Fatalf("reading the volume from a copy of the reader: %v", res)
		}
	}
	if st, data := r.do(r.apis[1], key, "DELETE", "/v1/snapshots/"+fork.Snapshot.ID, nil); st != 204 {
		t.Fatalf("deleting the fork's snapshot: %d %s", st, data)
	}
	r.endOwned(key, writer.ID, reader.ID, fork.Sandboxes[0].ID, copied.ID)

	n := r.byID(writer.Node)
	t.Logf("volume %s on %s: written by %s, read by %s, %d bytes used", name, n.id, writer.ID, reader.ID, v.UsedBytes)
	n.kill9()
	killed := time.Now()
	deadline := killed.Add(lostWithin)
	for e := r.nodeEntry(n); e == nil || !e.Lost; e = r.nodeEntry(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not declared lost", n.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	unavailable := func(what string, st int, data []byte) {
		t.Helper()
		if st != 503 || errorCode(data) != "capacity_exhausted" || !strings.Contains(string(data), "unavailable") {
			t.Fatalf("%s with the volume's node lost: %d %s, want 503 capacity_exhausted: ...unavailable", what, st, data)
		}
	}
	t.Logf("%s lost %v after its kill", n.id, time.Since(killed).Round(time.Millisecond))
	st, data = r.do(r.apis[1], key, "GET", vpath+"/files?path=/f", nil)
	unavailable("reading a file", st, data)
	st, data = r.do(r.apis[0], key, "GET", vpath+"/files?path=/", nil)
	unavailable("listing", st, data)
	st, _, data = r.create(r.apis[0], key, mount(true))
	unavailable("a create that mounts it", st, data)
	st, data = r.do(r.apis[0], key, "DELETE", vpath, nil)
	unavailable("deleting it", st, data)

	r.startNode(n)
	r.waitNode(n)
	if st, data := r.do(r.apis[0], key, "GET", vpath+"/files?path=/f", nil); st != 200 || string(data) != "hello\n" {
		t.Fatalf("the file once its node is back: %d %q", st, data)
	}
	if st, data := r.do(r.apis[1], key, "DELETE", vpath, nil); st != 204 {
		t.Fatalf("deleting the volume: %d %s", st, data)
	}
}

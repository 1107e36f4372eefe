package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestListingFiltersAndPages: GET /v1/sandboxes through the Go client,
// against a real server: newest first, filtered by state and metadata, in
// pages that together list each sandbox once; bad parameters are 400.
func TestListingFiltersAndPages(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)
	ctx := t.Context()
	var ids []string
	for _, task := range []string{"a", "b", "a"} {
		sb := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, Metadata: map[string]string{"task": task}})
		ids = append(ids, sb.ID)
	}
	if _, err := c.PauseSandbox(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	stopped := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512})
	if _, err := c.StopSandbox(ctx, stopped.ID); err != nil {
		t.Fatal(err)
	}
	got := func(o client.ListOptions) string {
		t.Helper()
		l, err := c.ListSandboxesWith(ctx, o)
		if err != nil {
			t.Fatalf("listing %+v: %v", o, err)
		}
		var out []string
		for _, sb := range l {
			out = append(out, sb.ID)
		}
		return strings.Join(out, " ")
	}
	all := strings.Join([]string{stopped.ID, ids[2], ids[1], ids[0]}, " ")
	if g := got(client.ListOptions{}); g != all {
		t.Errorf("default listing: got %q, want newest first %q (a recent end included)", g, all)
	}
	if g := got(client.ListOptions{Limit: 1}); g != all {
		t.Errorf("pages of one: got %q, want %q", g, all)
	}
	if g := got(client.ListOptions{Metadata: map[string]string{"task": "a"}}); g != ids[2]+" "+ids[0] {
		t.Errorf("metadata task=a: got %q", g)
	}
	if g := got(client.ListOptions{States: []string{"running", "paused"}}); g != ids[2]+" "+ids[1]+" "+ids[0] {
		t.Errorf("running and paused: got %q", g)
	}
	if g := got(client.ListOptions{States: []string{"paused"}, Metadata: map[string]string{"task": "b"}}); g != ids[1] {
		t.Errorf("paused with task=b: got %q", g)
	}
	// The CLI's ls takes the same filters.
	out, errOut, code := cli(t, s.Env(), "sandbox", "ls", "--metadata", "task=a", "--state", "running", "--json")
	var l api.SandboxList
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Sandboxes) != 2 || l.Sandboxes[0].ID != ids[2] || l.Sandboxes[1].ID != ids[0] {
		t.Errorf("sandbox ls --metadata task=a --state running: exit %d, %s %s; want %s then %s", code, out, errOut, ids[2], ids[0])
	}
	// --disk is the create option disk_gib.
	out, errOut, code = cli(t, s.Env(), "sandbox", "create", "--vcpus", "1", "--memory", "512", "--disk", "2")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("sandbox create --disk 2: exit %d, %s", code, errOut)
	}
	t.Cleanup(func() { c.StopSandbox(context.Background(), id) })
	if sb, err := c.GetSandbox(ctx, id); err != nil || sb.DiskGiB != 2 {
		t.Errorf("sandbox created with --disk 2: %+v, %v; want disk_gib 2", sb, err)
	}
	if _, errOut, code := cli(t, s.Env(), "sandbox", "create", "--disk", "0"); code != 2 {
		t.Errorf("sandbox create --disk 0: exit %d (%s), want the usage error 2", code, errOut)
	}
	for _, q := range []string{"?state=gone", "?limit=0", "?page_token=xyz", "?metadata=nokey", "?colour=red"} {
		if st, body := call(t, s, s.Key, "GET", "/v1/sandboxes"+q, nil); st != 400 || errorCode(body) != "invalid_request" {
			t.Errorf("GET /v1/sandboxes%s: got %d %s, want 400 invalid_request", q, st, body)
		}
	}
}

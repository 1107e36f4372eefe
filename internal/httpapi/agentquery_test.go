package httpapi

import (
	"net/http"
	"testing"

	"github.com/withruntime/withruntime/internal/store"
)

func TestListQueryChecked(t *testing.T) {
	e := newEnv(t, nil)
	key := e.keys[store.KeyFull]
	for _, path := range []string{
		"/files/list?path=.&limit=0", "/files/list?path=.&limit=100001", "/files/list?path=.&limit=x",
		"/processes?output=no", "/processes?running=2",
	} {
		resp := e.do("GET", "/v1/sandboxes/sbx-1"+path, key, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got status %d, want 400", path, resp.StatusCode)
		}
	}
	if n := len(e.agent.requests()); n != 0 {
		t.Fatalf("agent got %d requests, want none", n)
	}
	for _, path := range []string{"/files/list?path=.&limit=100000", "/processes?output=false&running=true"} {
		n := len(e.agent.requests())
		resp := e.do("GET", "/v1/sandboxes/sbx-1"+path, key, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: got status %d, want 200", path, resp.StatusCode)
		}
		got := e.agent.requests()[n]
		if want := path[len(got.Path)+1:]; got.RawQuery != want {
			t.Errorf("%s: agent got query %q, want %q", path, got.RawQuery, want)
		}
	}
}

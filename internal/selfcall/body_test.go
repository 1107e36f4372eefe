package selfcall

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// A streamed request body (no length known) reaches a handler that
// proxies it on: a ContentLength of 0 would make ReverseProxy drop it.
func TestStreamedBodyPassesAProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer backend.Close()
	u, _ := url.Parse(backend.URL)
	c := &http.Client{Transport: Transport{Handler: httputil.NewSingleHostReverseProxy(u)}}
	for name, body := range map[string]io.Reader{
		"streamed": io.MultiReader(strings.NewReader("hello "), strings.NewReader("world")),
		"sized":    strings.NewReader("hello world"),
	} {
		req, _ := http.NewRequest(http.MethodPut, "http://in-process/x", body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "hello world" {
			t.Errorf("%s body: got %q, want %q", name, got, "hello world")
		}
	}
}

package admission

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A handler served through Started on a Listener reads a body far larger
// than the header bound; without Started the connection counts the body
// as header bytes and answers 431.
func TestStartedBodyIsNotAHeader(t *testing.T) {
	echoLen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Write([]byte(strconv.FormatInt(n, 10)))
	})
	for _, c := range []struct {
		name   string
		h      http.Handler
		status int
	}{{"started", Started(echoLen), 200}, {"plain", echoLen, http.StatusRequestHeaderFieldsTooLarge}} {
		nl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := Listen(nl, ConnLimits{})
		srv := l.HTTPServer(c.h)
		go srv.Serve(l)
		body := io.MultiReader(strings.NewReader(strings.Repeat("z", 1<<20))) // streamed: chunked
		resp, err := http.Post("http://"+nl.Addr().String()+"/", "application/octet-stream", body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: got %d %s, want %d", c.name, resp.StatusCode, got, c.status)
		}
		if c.status == 200 && string(got) != "1048576" {
			t.Errorf("%s: the handler read %s bytes, want 1048576", c.name, got)
		}
	}
}

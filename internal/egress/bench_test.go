package egress

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// The benchmarks compare a request through the proxy with the same request
// straight to the upstream, all on loopback: what the proxy adds (sniffing,
// resolving, dialing, relaying), not what a network costs.

func benchEnv(b *testing.B) (*env, string) {
	e := newEnv(b, Policy{Internet: true, Allow: []string{"plain.test"}})
	payload := bytes.Repeat([]byte("x"), 100<<20)
	up := httpUpstream(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(payload)
			return
		}
		io.WriteString(w, "ok")
	}))
	e.toAddr(up)
	return e, up
}

func benchClient(dial string, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: !keepAlive,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp4", dial)
		},
	}}
}

func benchGet(b *testing.B, c *http.Client, url string) {
	b.Helper()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n == 0 {
		b.Fatalf("got %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkNewConnection: a small request on a new connection each time.
func BenchmarkNewConnection(b *testing.B) {
	e, up := benchEnv(b)
	url := "http://plain.test:" + port(up) + "/"
	b.Run("direct", func(b *testing.B) {
		c := benchClient(up, false)
		for b.Loop() {
			benchGet(b, c, url)
		}
	})
	b.Run("proxy", func(b *testing.B) {
		c := benchClient(e.addr, false)
		for b.Loop() {
			benchGet(b, c, url)
		}
	})
}

// BenchmarkDownload100MB: throughput of one large response.
func BenchmarkDownload100MB(b *testing.B) {
	e, up := benchEnv(b)
	url := "http://plain.test:" + port(up) + "/big"
	for _, tc := range []struct{ name, dial string }{{"direct", up}, {"proxy", e.addr}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(100 << 20)
			c := benchClient(tc.dial, true)
			for b.Loop() {
				benchGet(b, c, url)
			}
		})
	}
}

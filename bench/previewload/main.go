// Command previewload is both ends of bench's preview figures (see
// bench/preview.go): the HTTP server that runs inside a sandbox, and the
// client that measures it, run once inside the same sandbox (a direct
// connection to its 127.0.0.1) and once on the host through the preview
// proxy, so that both figures come from the same code.
//
//	previewload serve ADDR
//	previewload get URL N [HEADER:VALUE]          one request at a time: N latencies in µs, one a line
//	previewload rate URL CONNS SECONDS [HEADER:VALUE]   requests per second with CONNS clients in parallel
//	previewload download URL N [HEADER:VALUE]     N downloads: MB/s of each, one a line
//
// The client keeps its connections alive, as a browser does; through the
// proxy, the proxy still opens a connection into the sandbox per request.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fail("usage: previewload serve ADDR | get URL N | rate URL CONNS SECONDS | download URL N [HEADER:VALUE]")
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2])
	case "get":
		get(os.Args[2], atoi(os.Args[3]), header(4))
	case "rate":
		rate(os.Args[2], atoi(os.Args[3]), atoi(os.Args[4]), header(5))
	case "download":
		download(os.Args[2], atoi(os.Args[3]), header(4))
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "previewload:", msg)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

func header(i int) http.Header {
	h := http.Header{}
	if len(os.Args) > i {
		k, v, _ := strings.Cut(os.Args[i], ":")
		h.Set(k, strings.TrimSpace(v))
	}
	return h
}

// page is what GET / answers: a small page.
var page = []byte(strings.Repeat("preview bench page\n", 54)) // 1026 bytes

func serve(addr string) {
	chunk := make([]byte, 64<<10)
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(page)
	})
	http.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k, err := w.Write(chunk[:min(n, len(chunk))])
			if err != nil {
				return
			}
			n -= k
		}
	})
	fail(http.ListenAndServe(addr, nil).Error())
}

var client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true}, Timeout: 5 * time.Minute}

// fetch GETs u and returns the body's size.
func fetch(u string, h http.Header) int64 {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		fail(err.Error())
	}
	req.Header = h.Clone()
	resp, err := client.Do(req)
	if err != nil {
		fail(err.Error())
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fail(fmt.Sprintf("GET %s: %s, %v", u, resp.Status, err))
	}
	return n
}

func get(u string, n int, h http.Header) {
	for range 20 { // warm-up
		fetch(u, h)
	}
	for range n {
		start := time.Now()
		fetch(u, h)
		fmt.Println(time.Since(start).Microseconds())
	}
}

func rate(u string, conns, seconds int, h http.Header) {
	var done atomic.Int64
	stop := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for time.Now().Before(stop) {
				fetch(u, h)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Printf("%.1f\n", float64(done.Load())/time.Since(start).Seconds())
}

func download(u string, n int, h http.Header) {
	for range n {
		start := time.Now()
		size := fetch(u, h)
		fmt.Printf("%.1f\n", float64(size)/1e6/time.Since(start).Seconds())
	}
}

// Package console serves the web console at /console on the API's
// listener: a page and its script and style, built from pinned npm
// packages by scripts/console-build.sh (sources in console/) and embedded
// here, so that nothing is fetched from elsewhere at run time.
//
// The console is a client of the API like any other: the page holds no
// secret and is served without a key, while every call it makes carries
// the key the user typed (Authorization: Bearer, kept in the browser's
// session storage only) and is checked by the API as any other. Its
// headers keep what the page may load and who may frame it strict
// (Headers). It imports nothing of the project's.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Prefix is the path the console is served below; Prefix without its
// slash redirects to it.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every answer under Prefix:
// scripts and connections only from the server itself ('self' covers its
// ws: and wss: too), no inline script, no framing, no form posts, no
// base element. Inline styles are allowed because xterm.js sizes and
// colours the terminal with style elements it makes; a style cannot run
// script, and the page writes every value it shows as text, never HTML.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self'; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body []byte
	typ  string
	etag string
	// gz is body compressed, for clients that accept gzip (the script is
	// a quarter of its size so).
	gz []byte
}

// files are the assets by URL path; "/console/" is the page. Made on first
// use, not at start: every command of the binary would pay the compression.
var files = sync.OnceValue(func() map[string]asset {
	m := map[string]asset{}
	entries, err := fs.ReadDir(assets, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		a := asset{body: b, typ: mime.TypeByExtension(path.Ext(e.Name())), etag: hex.EncodeToString(sum[:12])}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // a valid level: no error
		zw.Write(b)
		zw.Close()
		a.gz = gz.Bytes()
		if e.Name() == "index.html" {
			m[Prefix] = a
			continue
		}
		m[Prefix+e.Name()] = a
	}
	return m
})

// Headers sets the headers every answer of the console carries.
func Headers(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// The same URLs serve a new build after an upgrade: always revalidate
	// (the ETag makes that cheap).
	h.Set("Cache-Control", "no-cache")
}

// Handler serves the console: GET and HEAD of its page and assets.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Headers(w.Header())
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a, ok := files()[r.URL.Path]
		if !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", a.typ)
		w.Header().Set("Vary", "Accept-Encoding")
		body, etag := a.body, a.etag
		if acceptsGzip(r.Header) {
			w.Header().Set("Content-Encoding", "gzip")
			body, etag = a.gz, etag+"-gz"
		}
		w.Header().Set("ETag", `"`+etag+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

// acceptsGzip reports whether Accept-Encoding lists gzip (without q=0).
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for _, e := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(e), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// Mount serves the console below Prefix and passes every other request
// to next.
func Mount(next http.Handler) http.Handler {
	console := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix) {
			console.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

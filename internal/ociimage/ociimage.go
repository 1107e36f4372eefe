package ociimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/withruntime/withruntime/internal/template"
)

// Errors. Each error this package returns about the image itself wraps
// ErrNotImage or ErrInvalid (both are the client's fault: invalid_request);
// ErrRegistry wraps what a registry answered or failed to answer. Errors of
// the ImportFunc come back unchanged, and so do the context's.
var (
	// ErrNotImage: the file or directory is not an image in a format this
	// package reads (docker save, OCI layout, OCI archive).
	ErrNotImage = errors.New("not an image")
	// ErrInvalid: an image that is malformed or refused: a bound passed
	// (layers, manifest, config, entries), a blob missing or not matching
	// its digest, no linux/amd64 image, an unsupported media type.
	ErrInvalid = errors.New("invalid image")
	// ErrRegistry: the registry could not be reached or refused (unknown
	// name, no access), or the reference names a registry this host may not
	// reach (a loopback, private or link-local address).
	ErrRegistry = errors.New("registry")
)

// Bounds on what an image may hold.
const (
	// MaxLayers is the most layers an image may have: a template holds at
	// most template.MaxLayers, and the platform layer is one of them.
	MaxLayers = template.MaxLayers - 1
	// MaxConfig bounds the image's config blob.
	MaxConfig = 1 << 20
	// MaxManifest bounds a manifest, an index and docker save's
	// manifest.json (the distribution spec's registries accept 4 MiB).
	MaxManifest = 4 << 20
	// maxAccountFile bounds the image's /etc/passwd and /etc/group.
	maxAccountFile = 1 << 20
	// maxArchiveEntries bounds the entries of an archive's outer tar (an
	// OCI archive or docker save), which are blobs and a few JSON files.
	maxArchiveEntries = 10000
	// maxTrailing bounds what may follow a layer's tar end (tar writers
	// pad to a record of 10 KiB).
	maxTrailing = 1 << 20
	// maxIndexDepth bounds nested indexes.
	maxIndexDepth = 3
)

// ImportFunc stores one layer: r is the layer's uncompressed tar stream,
// and the digest it returns names the stored layer ("sha256:" and hex).
// It should read r to its end; what it leaves unread is still read (and
// checked against the image's diff id) but not handed to it.
type ImportFunc func(ctx context.Context, r io.Reader) (digest string, err error)

// Options tune an import.
type Options struct {
	// CARoots is a PEM bundle the platform layer adds as
	// /etc/ssl/certs/ca-certificates.crt when the image has no CA bundle
	// of its own; nil adds none.
	CARoots []byte
	// AllowPrivateRegistry lets a registry reference reach loopback,
	// private and link-local addresses (tests; an operator's own registry).
	AllowPrivateRegistry bool
}

// Result is what an import made.
type Result struct {
	// Layers are the digests ImportFunc returned, bottom first.
	Layers []string
	// Defaults come from the image's config (see Defaults).
	Defaults template.Defaults
	// Platform is the platform layer, an uncompressed tar the caller
	// imports over Layers as the template's top layer (doc.go says what it
	// holds). Its bytes depend only on the image, so the same image gives
	// the same platform layer.
	Platform []byte
	// Manifest is the digest of the image's manifest ("" for docker save,
	// whose archive does not keep it).
	Manifest string
	// Bytes is the total size of the uncompressed layers.
	Bytes int64
}

// resolved is an image found in a source: its config and its layers.
type resolved struct {
	manifest string
	config   []byte
	layers   []layerSource
}

// layerSource opens one layer's blob as stored (maybe compressed). The
// reader checks the blob's size and digest when read to its end, where the
// source knows them.
type layerSource struct {
	desc v1.Descriptor
	open func() (io.ReadCloser, error)
}

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// run imports img's layers through imp, bottom first, and makes the
// platform layer from what they held.
func run(ctx context.Context, img *resolved, opts Options, imp ImportFunc) (*Result, error) {
	var cfg v1.ConfigFile
	if err := json.Unmarshal(img.config, &cfg); err != nil {
		return nil, invalidf("config: %v", err)
	}
	if cfg.OS != "" && cfg.OS != "linux" || cfg.Architecture != "" && cfg.Architecture != "amd64" {
		return nil, invalidf("the image is for %s/%s; sandboxes run linux/amd64", cfg.OS, cfg.Architecture)
	}
	if len(img.layers) > MaxLayers {
		return nil, invalidf("%d layers, more than the %d a template may hold (one more is the platform's)", len(img.layers), MaxLayers)
	}
	if len(cfg.RootFS.DiffIDs) != len(img.layers) {
		return nil, invalidf("the manifest has %d layers but the config's rootfs names %d", len(img.layers), len(cfg.RootFS.DiffIDs))
	}
	res := &Result{Manifest: img.manifest, Defaults: Defaults(cfg.Config)}
	fs := newTracker()
	for i, l := range img.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, n, err := importLayer(ctx, i, l, cfg.RootFS.DiffIDs[i], fs, imp)
		if err != nil {
			return nil, err
		}
		res.Layers = append(res.Layers, d)
		res.Bytes += n
	}
	p, err := fs.platformLayer(opts)
	if err != nil {
		return nil, err
	}
	res.Platform = p
	return res, nil
}

// layerMedia are the layer media types read; foreign (nondistributable)
// layers, whose bytes live elsewhere, are refused.
var layerMedia = map[types.MediaType]bool{
	types.OCILayer: true, types.OCILayerZStd: true, types.OCIUncompressedLayer: true,
	types.DockerLayer: true, types.DockerUncompressedLayer: true, "": true,
}

// blobLayer is a layer as stored, for partial.CompressedToLayer, which
// decompresses gzip and zstd by their magic numbers and passes anything
// else through.
type blobLayer struct {
	desc v1.Descriptor
	rc   io.Reader
}

func (b blobLayer) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b blobLayer) Size() (int64, error)                { return b.desc.Size, nil }
func (b blobLayer) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b blobLayer) Compressed() (io.ReadCloser, error)  { return io.NopCloser(b.rc), nil }

// errImported stands for "the importer returned": what it left unread is
// read on, but not handed to it.
var errImported = errors.New("importer returned")

// importLayer hands layer i's uncompressed stream to imp while the tracker
// reads the same bytes as a tar, and checks the stream against diffID.
func importLayer(ctx context.Context, i int, l layerSource, diffID v1.Hash, fs *tracker, imp ImportFunc) (string, int64, error) {
	if !layerMedia[l.desc.MediaType] {
		return "", 0, invalidf("layer %d: media type %q is not a layer this server reads", i, l.desc.MediaType)
	}
	raw, err := l.open()
	if err != nil {
		return "", 0, err
	}
	defer raw.Close()
	layer, err := partial.CompressedToLayer(blobLayer{desc: l.desc, rc: raw})
	if err != nil {
		return "", 0, invalidf("layer %d: %v", i, err)
	}
	un, err := layer.Uncompressed()
	if err != nil {
		return "", 0, invalidf("layer %d: %v", i, err)
	}
	defer un.Close()

	pr, pw := io.Pipe()
	type outcome struct {
		digest string
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		d, err := imp(ctx, pr)
		if err == nil {
			pr.CloseWithError(errImported)
		} else {
			pr.CloseWithError(err)
		}
		done <- outcome{d, err}
	}()
	h := sha256.New()
	cw := &countWriter{}
	sink := &pipeSink{pw: pw}
	src := io.TeeReader(un, io.MultiWriter(h, cw, sink))
	scanErr := fs.scanLayer(i, tar.NewReader(src))
	if scanErr == nil {
		// The tar's end leaves padding, which the diff id covers too; more
		// than maxTrailing after it is refused (a compressed stream of
		// zeros would otherwise be decompressed to its end).
		var n int64
		n, scanErr = io.Copy(io.Discard, io.LimitReader(src, maxTrailing+1))
		if scanErr == nil && n > maxTrailing {
			scanErr = invalidf("more than %d bytes follow the tar's end", maxTrailing)
		}
	}
	pw.CloseWithError(scanErr)
	o := <-done
	switch {
	case sink.failed && o.err != nil:
		// The scan stopped because the importer did: its error says why.
		return "", 0, o.err
	case scanErr != nil:
		return "", 0, scanError(i, scanErr)
	case o.err != nil:
		return "", 0, o.err
	}
	// The blob as stored is read to its end, where its reader checks its
	// size and digest (gzip stops at its own end).
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return "", 0, scanError(i, err)
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if got != diffID.String() {
		return "", 0, invalidf("layer %d: its content is %s but the config's diff id is %s", i, got, diffID)
	}
	if !template.ValidDigest(o.digest) {
		return "", 0, fmt.Errorf("layer %d: the layer store answered digest %q", i, o.digest)
	}
	return o.digest, cw.n, nil
}

// scanError says what went wrong reading layer i: the image's fault
// unless it is the context's or already says whose.
func scanError(i int, err error) error {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotImage) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRegistry) {
		return fmt.Errorf("layer %d: %w", i, err)
	}
	return invalidf("layer %d: %v", i, err)
}

// pipeSink writes to the importer's pipe until the importer returns, then
// drops what follows.
type pipeSink struct {
	pw     *io.PipeWriter
	done   bool // the importer returned
	failed bool // the importer returned an error
}

func (s *pipeSink) Write(p []byte) (int, error) {
	if s.done {
		return len(p), nil
	}
	n, err := s.pw.Write(p)
	if errors.Is(err, errImported) {
		s.done = true
		return len(p), nil
	}
	if err != nil {
		s.failed = true
	}
	return n, err
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// Defaults maps an image's config to a template's defaults: Env (every
// KEY=VALUE, PATH included), WorkingDir as Workdir, User as User ("root"
// for an image with none or with uid 0, as docker runs it; "user", the
// sandbox's unprivileged account, for any other), and Entrypoint then Cmd,
// each word shell-quoted, as StartCmd. Nothing else.
func Defaults(c v1.Config) template.Defaults {
	d := template.Defaults{Workdir: c.WorkingDir, User: mapUser(c.User)}
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if d.Env == nil {
			d.Env = map[string]string{}
		}
		d.Env[k] = v
	}
	words := append(append([]string(nil), c.Entrypoint...), c.Cmd...)
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	d.StartCmd = strings.Join(q, " ")
	return d
}

func mapUser(u string) string {
	name, _, _ := strings.Cut(u, ":")
	switch name {
	case "", "root", "0":
		return "root"
	}
	return "user"
}

// shellQuote quotes w for a POSIX shell: as it is when it holds only
// characters no shell treats specially, else in single quotes.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+,") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ReadFile imports the image at file, which is a docker save archive, an
// OCI image layout directory or an OCI archive (a tar of a layout); which
// one is read from its content, never its name. A layout directory is read
// beneath itself: links in it never lead out of it.
func ReadFile(ctx context.Context, file string, opts Options, imp ImportFunc) (*Result, error) {
	src, err := openLocal(file)
	if err != nil {
		return nil, err
	}
	defer src.close()
	img, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	return run(ctx, img, opts, imp)
}

// files is a tree of named files: a directory, or the entries of a tar.
type files interface {
	// open opens the plain file at name (a clean relative path), and
	// says its size.
	open(name string) (io.ReadCloser, int64, error)
	has(name string) bool
	close()
}

type localSource struct{ files files }

func (s *localSource) close() { s.files.close() }

func openLocal(file string) (*localSource, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is neither a file nor a directory", ErrNotImage, file)
	}
	if fi.IsDir() {
		r, err := os.OpenRoot(file)
		if err != nil {
			return nil, err
		}
		return &localSource{files: dirFiles{r}}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	t, err := indexTar(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &localSource{files: t}, nil
}

// resolve finds the image: an OCI layout (oci-layout and index.json,
// which newer docker save archives also hold) first, else docker save's
// manifest.json.
func (s *localSource) resolve(ctx context.Context) (*resolved, error) {
	switch {
	case s.files.has("oci-layout") && s.files.has("index.json"):
		return s.resolveLayout(ctx)
	case s.files.has("manifest.json"):
		return s.resolveDockerSave()
	}
	return nil, fmt.Errorf("%w: no oci-layout and index.json (an OCI layout) nor manifest.json (docker save)", ErrNotImage)
}

// readAll reads the file at name, at most limit bytes.
func (s *localSource) readAll(name string, limit int64) ([]byte, error) {
	rc, size, err := s.files.open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > limit {
		return nil, invalidf("%s is %d bytes, more than %d", name, size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, invalidf("%s: %v", name, err)
	}
	if int64(len(b)) > limit {
		return nil, invalidf("%s is more than %d bytes", name, limit)
	}
	return b, nil
}

func blobName(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// blob opens the blob d names, checking its size and digest as it is read.
func (s *localSource) blob(d v1.Descriptor) (io.ReadCloser, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, invalidf("digest %s: only sha256 is read", d.Digest)
	}
	rc, size, err := s.files.open(blobName(d.Digest))
	if err != nil {
		return nil, err
	}
	if size != d.Size {
		rc.Close()
		return nil, invalidf("blob %s is %d bytes, but its descriptor says %d", d.Digest, size, d.Size)
	}
	return &verifier{rc: rc, want: d.Digest, size: d.Size, h: newHash()}, nil
}

// manifest reads the manifest or index d names, checked and bounded.
func (s *localSource) manifest(d v1.Descriptor, limit int64) ([]byte, error) {
	if d.Size > limit {
		return nil, invalidf("%s %s is %d bytes, more than %d", d.MediaType, d.Digest, d.Size, limit)
	}
	rc, err := s.blob(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (s *localSource) resolveLayout(ctx context.Context) (*resolved, error) {
	raw, err := s.readAll("index.json", MaxManifest)
	if err != nil {
		return nil, err
	}
	d, err := pickImage(ctx, raw, func(d v1.Descriptor) ([]byte, error) { return s.manifest(d, MaxManifest) })
	if err != nil {
		return nil, err
	}
	mraw, err := s.manifest(d, MaxManifest)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(mraw)
	if err != nil {
		return nil, err
	}
	if m.Config.Size > MaxConfig {
		return nil, invalidf("the config is %d bytes, more than %d", m.Config.Size, MaxConfig)
	}
	cfg, err := s.manifest(m.Config, MaxConfig)
	if err != nil {
		return nil, err
	}
	img := &resolved{manifest: d.Digest.String(), config: cfg}
	for _, l := range m.Layers {
		l := l
		img.layers = append(img.layers, layerSource{desc: l, open: func() (io.ReadCloser, error) { return s.blob(l) }})
	}
	return img, nil
}

// dockerSaveEntry is one image of docker save's manifest.json.
type dockerSaveEntry struct {
	Config string
	Layers []string
}

func (s *localSource) resolveDockerSave() (*resolved, error) {
	raw, err := s.readAll("manifest.json", MaxManifest)
	if err != nil {
		return nil, err
	}
	var entries []dockerSaveEntry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, invalidf("manifest.json: %v", err)
	}
	if len(entries) != 1 {
		return nil, invalidf("manifest.json lists %d images; an import takes an archive of one", len(entries))
	}
	e := entries[0]
	if len(e.Layers) > MaxLayers {
		return nil, invalidf("%d layers, more than the %d a template may hold (one more is the platform's)", len(e.Layers), MaxLayers)
	}
	cfgName, ok := cleanRel(e.Config)
	if !ok {
		return nil, invalidf("manifest.json: bad config name %q", e.Config)
	}
	cfg, err := s.readAll(cfgName, MaxConfig)
	if err != nil {
		return nil, err
	}
	img := &resolved{config: cfg}
	for _, l := range e.Layers {
		name, ok := cleanRel(l)
		if !ok {
			return nil, invalidf("manifest.json: bad layer name %q", l)
		}
		if !s.files.has(name) {
			return nil, invalidf("manifest.json names layer %s, which the archive lacks", name)
		}
		img.layers = append(img.layers, layerSource{open: func() (io.ReadCloser, error) {
			rc, _, err := s.files.open(name)
			return rc, err
		}})
	}
	return img, nil
}

// cleanRel cleans a name inside an archive; ok is false for one leading
// out of it.
func cleanRel(name string) (string, bool) {
	p := path.Clean(name)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return "", false
	}
	return p, true
}

// parseManifest reads an image manifest (OCI or docker's schema 2).
func parseManifest(raw []byte) (*v1.Manifest, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, invalidf("manifest: %v", err)
	}
	switch m.MediaType {
	case "", types.OCIManifestSchema1, types.DockerManifestSchema2:
	default:
		return nil, invalidf("manifest media type %q is not an image manifest", m.MediaType)
	}
	if len(m.Layers) > MaxLayers {
		return nil, invalidf("%d layers, more than the %d a template may hold (one more is the platform's)", len(m.Layers), MaxLayers)
	}
	return m, nil
}

// verifier reads a blob and fails at its end unless it had the size and
// digest its descriptor said.
type verifier struct {
	rc   io.ReadCloser
	want v1.Hash
	size int64
	n    int64
	h    hash.Hash
	err  error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if rest := v.size + 1 - v.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := v.rc.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.size {
		v.err = invalidf("blob %s is longer than its %d bytes", v.want, v.size)
		return n, v.err
	}
	if err == io.EOF {
		if v.n != v.size {
			v.err = invalidf("blob %s is %d bytes, not %d", v.want, v.n, v.size)
		} else if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.Hex {
			v.err = invalidf("blob %s has digest sha256:%s: it does not match its content", v.want, got)
		} else {
			v.err = io.EOF
		}
		return n, v.err
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }

// dirFiles is an OCI layout directory, read beneath its root.
type dirFiles struct{ r *os.Root }

func (d dirFiles) open(name string) (io.ReadCloser, int64, error) {
	f, err := d.r.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, invalidf("%s is missing", name)
		}
		return nil, 0, invalidf("%s: %v", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, invalidf("%s is not a plain file", name)
	}
	return f, fi.Size(), nil
}

func (d dirFiles) has(name string) bool {
	fi, err := d.r.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

func (d dirFiles) close() { d.r.Close() }

// tarFiles is an archive: an index of its entries, read in place.
type tarFiles struct {
	f       *os.File
	entries map[string]tarEntry
}

type tarEntry struct {
	offset, size int64
	link         string // a symlink's or hardlink's target, cleaned
}

func (t *tarFiles) close() { t.f.Close() }

// resolveEntry follows links (docker save's older archives link equal
// layers) a few hops, within the archive.
func (t *tarFiles) resolveEntry(name string) (tarEntry, bool) {
	for range 8 {
		e, ok := t.entries[name]
		if !ok {
			return tarEntry{}, false
		}
		if e.link == "" {
			return e, true
		}
		name = e.link
	}
	return tarEntry{}, false
}

func (t *tarFiles) has(name string) bool { _, ok := t.resolveEntry(name); return ok }

func (t *tarFiles) open(name string) (io.ReadCloser, int64, error) {
	e, ok := t.resolveEntry(name)
	if !ok {
		return nil, 0, invalidf("%s is missing from the archive", name)
	}
	return io.NopCloser(io.NewSectionReader(t.f, e.offset, e.size)), e.size, nil
}

// countingFile is the archive as tar.Reader reads it: its position is the
// offset of an entry's data right after Next, and it seeks, so tar.Reader
// skips entries' data without reading it.
type countingFile struct {
	f   *os.File
	pos int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.pos += int64(n)
	return n, err
}

func (c *countingFile) Seek(off int64, whence int) (int64, error) {
	p, err := c.f.Seek(off, whence)
	if err == nil {
		c.pos = p
	}
	return p, err
}

// indexTar reads the headers of the archive f. A file that is not a tar
// is not an image; a gzipped one is named as such.
func indexTar(f *os.File) (*tarFiles, error) {
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	if n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return nil, fmt.Errorf("%w: a gzip-compressed file; decompress it to the archive docker save or an OCI archive is", ErrNotImage)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	cf := &countingFile{f: f}
	tr := tar.NewReader(cf)
	t := &tarFiles{f: f, entries: map[string]tarEntry{}}
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("%w: not a tar archive (%v)", ErrNotImage, err)
			}
			return nil, invalidf("the archive: %v", err)
		}
		if i >= maxArchiveEntries {
			return nil, invalidf("the archive has more than %d entries", maxArchiveEntries)
		}
		name, ok := cleanRel(hdr.Name)
		if !ok {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			t.entries[name] = tarEntry{offset: cf.pos, size: hdr.Size}
		case tar.TypeSymlink:
			if target, ok := cleanRel(path.Join(path.Dir(name), hdr.Linkname)); ok && !strings.HasPrefix(hdr.Linkname, "/") {
				t.entries[name] = tarEntry{link: target}
			}
		case tar.TypeLink:
			if target, ok := cleanRel(hdr.Linkname); ok {
				t.entries[name] = tarEntry{link: target}
			}
		}
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("%w: an empty archive", ErrNotImage)
	}
	return t, nil
}

func newHash() hash.Hash { return sha256.New() }

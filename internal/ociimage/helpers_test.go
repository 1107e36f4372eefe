package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one tar entry a test layer holds.
type entry struct {
	name     string
	typ      byte
	body     string
	mode     int64
	uid, gid int
	link     string
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func dir(name string, mode int64, uid, gid int) entry {
	return entry{name: name, typ: tar.TypeDir, mode: mode, uid: uid, gid: gid}
}
func symlink(name, to string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: to, mode: 0o777}
}

// tarOf writes entries as an uncompressed tar.
func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gzipLayer is a gzip-compressed OCI layer of tar bytes b.
func gzipLayer(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// plainLayer is an uncompressed OCI layer of tar bytes b.
func plainLayer(b []byte) v1.Layer { return static.NewLayer(b, types.OCIUncompressedLayer) }

// makeImage builds a linux/amd64 (unless arch says otherwise) OCI image of
// layers with config c.
func makeImage(t testing.TB, arch string, c v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, c
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// writeDockerSave writes img as docker save does, returning the file.
func writeDockerSave(t testing.TB, img v1.Image) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.tar")
	tag, err := name.NewTag("example/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeLayout writes an OCI layout of img (or of index ii when img is
// nil), returning the directory.
func writeLayout(t testing.TB, img v1.Image, ii v1.ImageIndex) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "layout")
	if ii == nil {
		ii = empty.Index
	}
	p, err := layout.Write(d, ii)
	if err != nil {
		t.Fatal(err)
	}
	if img != nil {
		if err := p.AppendImage(img); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// tarDir writes directory d as a tar (an OCI archive when d is a layout).
func tarDir(t testing.TB, d string) string { return tarDirAs(t, d, "") }

// tarDirAs is tarDir with prefix before each name ("./", as tar -C d .
// writes).
func tarDirAs(t testing.TB, d, prefix string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.oci.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == d {
			return err
		}
		rel, _ := filepath.Rel(d, path)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = prefix + rel
		if e.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is an ImportFunc that keeps each layer's bytes.
type recorder struct {
	mu     sync.Mutex
	layers [][]byte
}

func (r *recorder) imp(ctx context.Context, rd io.Reader) (string, error) {
	b, err := io.ReadAll(rd)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.layers = append(r.layers, b)
	r.mu.Unlock()
	return digestOf(b), nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.layers)
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// readTar lists a tar's entries by name.
func readTar(t testing.TB, b []byte) (map[string]*tar.Header, map[string]string, []string) {
	t.Helper()
	hdrs, bodies := map[string]*tar.Header{}, map[string]string{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs[h.Name], bodies[h.Name] = h, string(body)
		order = append(order, h.Name)
	}
	return hdrs, bodies, order
}

func layoutPath(d string) (layout.Path, error) { return layout.FromPath(d) }

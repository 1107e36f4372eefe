package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadFile: any bytes as an image file are imported or refused with
// ErrNotImage or ErrInvalid; nothing panics or hangs, and what was
// imported matches the layers' digests.
func FuzzReadFile(f *testing.F) {
	layers := twoLayers(f)
	img := makeImage(f, "amd64", baseConfig, gzipLayer(f, layers[0]), plainLayer(layers[1]))
	for _, p := range []string{writeDockerSave(f, img), tarDir(f, writeLayout(f, img, nil)),
		dockerSave(f, []string{digestOf(layers[0])}, layers[0])} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "image")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		res, err := ReadFile(context.Background(), p, Options{}, rec.imp)
		if err != nil {
			if !errors.Is(err, ErrNotImage) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrNotImage or ErrInvalid", err)
			}
			return
		}
		for i, d := range res.Layers {
			if d != digestOf(rec.layers[i]) {
				t.Fatalf("layer %d: %s is not what was imported", i, d)
			}
		}
		readTar(t, res.Platform)
	})
}

// FuzzPlatformLayer: of any layer, the platform layer is a tar naming only
// the paths it may write, and nothing panics.
func FuzzPlatformLayer(f *testing.F) {
	for _, l := range twoLayers(f) {
		f.Add(l)
	}
	f.Add(tarOf(f, symlink("etc", "/"), file("etc/.wh.passwd", ""), file(".wh..wh..opq", "")))
	f.Fuzz(func(t *testing.T, layer []byte) {
		tr := newTracker()
		if err := tr.scanLayer(0, tar.NewReader(bytes.NewReader(layer))); err != nil {
			return
		}
		b, err := tr.platformLayer(Options{CARoots: []byte("PEM")})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			return
		}
		hdrs, _, _ := readTar(t, b)
		for n, h := range hdrs {
			if !watched[strings.TrimSuffix(n, "/")] {
				t.Fatalf("the platform layer writes %s, which it never may", n)
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
				t.Fatalf("the platform layer writes %s of type %c", n, h.Typeflag)
			}
		}
	})
}

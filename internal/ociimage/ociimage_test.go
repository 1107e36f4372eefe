package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/withruntime/withruntime/internal/template"
)

const userLine = "user:*:1000:1000:user:/home/user:/bin/sh\n"

var baseConfig = v1.Config{
	Env:        []string{"PATH=/usr/local/bin:/usr/bin", "GREETING=hello world", "EMPTY="},
	WorkingDir: "/app",
	User:       "app:app",
	Entrypoint: []string{"/usr/bin/env"},
	Cmd:        []string{"sh", "-c", "echo it's $GREETING"},
}

// twoLayers are a small image's layers: the second replaces /etc/passwd
// (without a final newline) and whites out a file of the first.
func twoLayers(t testing.TB) [][]byte {
	return [][]byte{
		tarOf(t, dir("etc/", 0o750, 0, 0), file("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"), file("etc/group", "root:x:0:\napp:x:1001:\n"),
			dir("usr/", 0o755, 0, 0), dir("usr/bin/", 0o755, 0, 0), file("usr/bin/sudo", "#!sudo"), dir("app/", 0o755, 1001, 1001), file("app/old", "old")),
		tarOf(t, file("etc/passwd", "root:x:0:0:root:/root:/bin/bash\napp:x:1001:1001::/app:/bin/sh"), file("app/.wh.old", ""), file("app/new", "new")),
	}
}

func checkTwoLayers(t *testing.T, res *Result, rec *recorder, layers [][]byte) {
	t.Helper()
	if len(res.Layers) != len(layers) || rec.count() != len(layers) {
		t.Fatalf("got %d layers (%d imported), want %d", len(res.Layers), rec.count(), len(layers))
	}
	for i, l := range layers {
		if !bytes.Equal(rec.layers[i], l) {
			t.Errorf("layer %d: the importer got %d bytes that differ from the layer's %d", i, len(rec.layers[i]), len(l))
		}
		if res.Layers[i] != digestOf(l) {
			t.Errorf("layer %d: digest %s, want %s", i, res.Layers[i], digestOf(l))
		}
	}
	want := template.Defaults{
		Env:      map[string]string{"PATH": "/usr/local/bin:/usr/bin", "GREETING": "hello world", "EMPTY": ""},
		Workdir:  "/app",
		User:     "user",
		StartCmd: `/usr/bin/env sh -c 'echo it'\''s $GREETING'`,
	}
	gotJSON, _ := json.Marshal(res.Defaults)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("defaults %s, want %s", gotJSON, wantJSON)
	}
	hdrs, bodies, order := readTar(t, res.Platform)
	if got, want := bodies["etc/passwd"], "root:x:0:0:root:/root:/bin/bash\napp:x:1001:1001::/app:/bin/sh\n"+userLine; got != want {
		t.Errorf("platform /etc/passwd = %q, want %q", got, want)
	}
	if got, want := bodies["etc/group"], "root:x:0:\napp:x:1001:\nuser:x:1000:\n"; got != want {
		t.Errorf("platform /etc/group = %q, want %q", got, want)
	}
	if h := hdrs["etc/"]; h == nil || h.Mode != 0o750 {
		t.Errorf("platform /etc = %+v, want the image's mode 0750 again", h)
	}
	if h := hdrs["etc/passwd"]; h == nil || h.ModTime.Unix() != 1700000000 || h.Mode != 0o644 {
		t.Errorf("platform /etc/passwd header %+v, want the image's mode and time", h)
	}
	if got := bodies["etc/sudoers.d/withruntime"]; got != "user ALL=(ALL) NOPASSWD:ALL\n" || hdrs["etc/sudoers.d/withruntime"].Mode != 0o440 {
		t.Errorf("sudoers entry %q mode %o", got, hdrs["etc/sudoers.d/withruntime"].Mode)
	}
	for _, d := range []string{"workspace/", "home/user/"} {
		if h := hdrs[d]; h == nil || h.Uid != 1000 || h.Gid != 1000 || h.Typeflag != tar.TypeDir {
			t.Errorf("platform %s = %+v, want a directory of 1000:1000", d, h)
		}
	}
	if h := hdrs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("platform /tmp = %+v, want mode 1777", h)
	}
	for _, n := range []string{"app/", "usr/", "etc/ssl/certs/ca-certificates.crt"} {
		if hdrs[n] != nil {
			t.Errorf("the platform layer names %s, which it must leave alone", n)
		}
	}
	// Parents come before their children.
	seen := map[string]bool{}
	for _, n := range order {
		if p := filepath.Dir(strings.TrimSuffix(n, "/")); p != "." && !seen[p+"/"] {
			t.Errorf("%s comes before its parent %s/", n, p)
		}
		seen[n] = true
	}
}

// TestFormats reads the same image from each format, with gzip and with
// uncompressed layers: the importer gets each layer's tar, bottom first,
// byte for byte; the config becomes the defaults; the platform layer merges
// /etc/passwd.
func TestFormats(t *testing.T) {
	layers := twoLayers(t)
	for _, comp := range []string{"gzip", "plain"} {
		var ls []v1.Layer
		for _, l := range layers {
			if comp == "gzip" {
				ls = append(ls, gzipLayer(t, l))
			} else {
				ls = append(ls, plainLayer(l))
			}
		}
		img := makeImage(t, "amd64", baseConfig, ls...)
		for format, mk := range map[string]func() string{
			"docker-save": func() string { return writeDockerSave(t, img) },
			"layout":      func() string { return writeLayout(t, img, nil) },
			"oci-archive": func() string { return tarDir(t, writeLayout(t, img, nil)) },
		} {
			t.Run(format+"/"+comp, func(t *testing.T) {
				rec := &recorder{}
				res, err := ReadFile(context.Background(), mk(), Options{}, rec.imp)
				if err != nil {
					t.Fatal(err)
				}
				checkTwoLayers(t, res, rec, layers)
				if format != "docker-save" {
					d, _ := img.Digest()
					if res.Manifest != d.String() {
						t.Errorf("manifest %s, want %s", res.Manifest, d)
					}
				}
			})
		}
	}
}

// TestImporterStopsEarly: an importer that returns before the stream's end
// (a tar reader stops at the archive's end) neither hangs the import nor
// skips the checks.
func TestImporterStopsEarly(t *testing.T) {
	layers := twoLayers(t)
	img := makeImage(t, "amd64", baseConfig, plainLayer(layers[0]), plainLayer(layers[1]))
	n := 0
	imp := func(ctx context.Context, r io.Reader) (string, error) {
		n++
		if _, err := io.ReadFull(r, make([]byte, 512)); err != nil {
			return "", err
		}
		return digestOf([]byte{byte(n)}), nil
	}
	res, err := ReadFile(context.Background(), writeLayout(t, img, nil), Options{}, imp)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layers) != 2 || res.Layers[1] != digestOf([]byte{2}) {
		t.Fatalf("layers %v", res.Layers)
	}
	if _, bodies, _ := readTar(t, res.Platform); !strings.HasSuffix(bodies["etc/passwd"], "app:x:1001:1001::/app:/bin/sh\n"+userLine) {
		t.Errorf("the platform layer missed the second layer's passwd: %q", bodies["etc/passwd"])
	}
}

// TestImporterError: the importer's error comes back as it was.
func TestImporterError(t *testing.T) {
	boom := errors.New("quota reached")
	img := makeImage(t, "amd64", baseConfig, gzipLayer(t, twoLayers(t)[0]))
	imp := func(ctx context.Context, r io.Reader) (string, error) {
		io.ReadFull(r, make([]byte, 100))
		return "", boom
	}
	_, err := ReadFile(context.Background(), writeLayout(t, img, nil), Options{}, imp)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the importer's", err)
	}
}

// TestIndexPicksAmd64: of an index (an attestation entry, arm64 and amd64
// images), the amd64 image is imported; nested under a layout's own index
// too; an index without one is refused naming what it has.
func TestIndexPicksAmd64(t *testing.T) {
	amdLayer := tarOf(t, file("amd64", "yes"))
	arm := makeImage(t, "arm64", v1.Config{}, plainLayer(tarOf(t, file("arm64", "no"))))
	amd := makeImage(t, "amd64", v1.Config{Cmd: []string{"/amd64"}}, plainLayer(amdLayer))
	att := makeImage(t, "", v1.Config{}, plainLayer(tarOf(t, file("attestation", "no"))))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	nested := writeLayout(t, nil, nil)
	{
		p, err := layoutPath(nested)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendIndex(idx); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range map[string]string{"flat": writeLayout(t, nil, idx), "nested": nested, "archive": tarDir(t, nested)} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			res, err := ReadFile(context.Background(), src, Options{}, rec.imp)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Layers) != 1 || res.Layers[0] != digestOf(amdLayer) || res.Defaults.StartCmd != "/amd64" {
				t.Fatalf("imported %v (start %q), want the amd64 image's layer", res.Layers, res.Defaults.StartCmd)
			}
		})
	}
	armOnly := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	rec := &recorder{}
	_, err := ReadFile(context.Background(), writeLayout(t, nil, armOnly), Options{}, rec.imp)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "linux/arm64") || rec.count() != 0 {
		t.Fatalf("an arm64-only index: err = %v (imported %d), want ErrInvalid naming linux/arm64", err, rec.count())
	}
	// An image of one platform that names none in its layout is read, and
	// refused when it is not amd64.
	_, err = ReadFile(context.Background(), writeLayout(t, arm, nil), Options{}, rec.imp)
	if !errors.Is(err, ErrInvalid) || rec.count() != 0 {
		t.Fatalf("an arm64 image: err = %v, want ErrInvalid", err)
	}
}

// TestNotImage: files that are no image are ErrNotImage, whatever their
// names.
func TestNotImage(t *testing.T) {
	d := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarOf(t, file("manifest.json", "[]")))
	zw.Close()
	emptyDir := filepath.Join(d, "emptydir")
	os.Mkdir(emptyDir, 0o755)
	halfLayout := filepath.Join(d, "half")
	os.Mkdir(halfLayout, 0o755)
	os.WriteFile(filepath.Join(halfLayout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	fifo := filepath.Join(d, "fifo.tar")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{
		"fifo":        fifo,
		"text":        write("image.tar", []byte("hello, this is not a tar\n")),
		"empty file":  write("empty.tar", nil),
		"plain tar":   write("plain.tar", tarOf(t, file("hello.txt", "hi"), file("index.json.bak", "{}"))),
		"empty tar":   write("emptytar.tar", tarOf(t)),
		"gzipped":     write("image.tar.gz", gz.Bytes()),
		"empty dir":   emptyDir,
		"half layout": halfLayout,
	} {
		rec := &recorder{}
		if _, err := ReadFile(context.Background(), p, Options{}, rec.imp); !errors.Is(err, ErrNotImage) {
			t.Errorf("%s: err = %v, want ErrNotImage", name, err)
		}
	}
}

// TestTooManyLayers: an image of more layers than a template may hold is
// refused before any is imported.
func TestTooManyLayers(t *testing.T) {
	var ls []v1.Layer
	for i := 0; i < MaxLayers+1; i++ {
		ls = append(ls, plainLayer(tarOf(t, file("f", strings.Repeat("x", i)))))
	}
	img := makeImage(t, "amd64", v1.Config{}, ls...)
	for name, p := range map[string]string{"layout": writeLayout(t, img, nil), "docker-save": writeDockerSave(t, img)} {
		rec := &recorder{}
		_, err := ReadFile(context.Background(), p, Options{}, rec.imp)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "32 layers") || rec.count() != 0 {
			t.Errorf("%s: err = %v (imported %d), want ErrInvalid before any import", name, err, rec.count())
		}
	}
	// MaxLayers is fine.
	img = makeImage(t, "amd64", v1.Config{}, ls[:MaxLayers]...)
	rec := &recorder{}
	if res, err := ReadFile(context.Background(), writeLayout(t, img, nil), Options{}, rec.imp); err != nil || len(res.Layers) != MaxLayers {
		t.Fatalf("%d layers: %v", MaxLayers, err)
	}
}

// TestHugeConfig: a config over MaxConfig is refused unread.
func TestHugeConfig(t *testing.T) {
	img := makeImage(t, "amd64", v1.Config{Env: []string{"BIG=" + strings.Repeat("x", MaxConfig)}}, plainLayer(tarOf(t, file("f", "x"))))
	for name, p := range map[string]string{"layout": writeLayout(t, img, nil), "docker-save": writeDockerSave(t, img)} {
		rec := &recorder{}
		_, err := ReadFile(context.Background(), p, Options{}, rec.imp)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than") || rec.count() != 0 {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// blobFile is the file of blob h in layout d.
func blobFile(d string, h v1.Hash) string { return filepath.Join(d, "blobs", h.Algorithm, h.Hex) }

// TestMissingBlob: a manifest naming a blob the layout lacks is refused.
func TestMissingBlob(t *testing.T) {
	layer := plainLayer(twoLayers(t)[0])
	img := makeImage(t, "amd64", v1.Config{}, layer)
	d := writeLayout(t, img, nil)
	h, _ := layer.Digest()
	if err := os.Remove(blobFile(d, h)); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{"layout": d, "archive": tarDir(t, d)} {
		_, err := ReadFile(context.Background(), p, Options{}, (&recorder{}).imp)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "missing") {
			t.Errorf("%s: err = %v, want ErrInvalid saying the blob is missing", name, err)
		}
	}
	cfg, _ := img.ConfigName()
	os.Remove(blobFile(d, cfg))
	if _, err := ReadFile(context.Background(), d, Options{}, (&recorder{}).imp); !errors.Is(err, ErrInvalid) {
		t.Errorf("no config: err = %v, want ErrInvalid", err)
	}
}

// TestBlobDigestMismatch: a blob whose bytes do not match its digest is
// refused, for a layer (checked as it streams) and for the config.
func TestBlobDigestMismatch(t *testing.T) {
	layer := plainLayer(twoLayers(t)[0])
	img := makeImage(t, "amd64", v1.Config{}, layer)
	d := writeLayout(t, img, nil)
	h, _ := layer.Digest()
	b, err := os.ReadFile(blobFile(d, h))
	if err != nil {
		t.Fatal(err)
	}
	// The same size, one byte of a file's content changed: still a tar.
	i := bytes.Index(b, []byte("#!sudo"))
	b[i+2] = 'S'
	if err := os.WriteFile(blobFile(d, h), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{"layout": d, "archive": tarDir(t, d)} {
		_, err := ReadFile(context.Background(), p, Options{}, (&recorder{}).imp)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "does not match") {
			t.Errorf("%s: err = %v, want ErrInvalid on the digest", name, err)
		}
	}
	cfg, _ := img.ConfigName()
	cb, _ := os.ReadFile(blobFile(d, cfg))
	cb[len(cb)-2] = ' '
	os.WriteFile(blobFile(d, cfg), cb, 0o644)
	rec := &recorder{}
	if _, err := ReadFile(context.Background(), d, Options{}, rec.imp); !errors.Is(err, ErrInvalid) || rec.count() != 0 {
		t.Errorf("a changed config: err = %v, want ErrInvalid before any import", err)
	}
}

// dockerSave writes a docker save archive by hand: manifest.json, a config
// whose diff ids are diffIDs, and the layers.
func dockerSave(t testing.TB, diffIDs []string, layers ...[]byte) string {
	cfg, _ := json.Marshal(map[string]any{"os": "linux", "architecture": "amd64", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}})
	var names []string
	entries := []entry{file("cfg.json", string(cfg))}
	for i, l := range layers {
		n := "l" + string(rune('0'+i)) + "/layer.tar"
		names = append(names, n)
		entries = append(entries, file(n, string(l)))
	}
	m, _ := json.Marshal([]map[string]any{{"Config": "cfg.json", "RepoTags": []string{"x:y"}, "Layers": names}})
	entries = append(entries, file("manifest.json", string(m)))
	p := filepath.Join(t.TempDir(), "save.tar")
	os.WriteFile(p, tarOf(t, entries...), 0o644)
	return p
}

// TestDiffIDMismatch: docker save keeps no blob digests; a layer whose
// content is not what the config's diff id says is refused all the same.
func TestDiffIDMismatch(t *testing.T) {
	layers := twoLayers(t)
	rec := &recorder{}
	if _, err := ReadFile(context.Background(), dockerSave(t, []string{digestOf(layers[0]), digestOf(layers[1])}, layers...), Options{}, rec.imp); err != nil {
		t.Fatalf("a good hand-made archive: %v", err)
	}
	_, err := ReadFile(context.Background(), dockerSave(t, []string{digestOf(layers[0]), digestOf(layers[0])}, layers...), Options{}, (&recorder{}).imp)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "diff id") {
		t.Fatalf("err = %v, want ErrInvalid on the diff id", err)
	}
	_, err = ReadFile(context.Background(), dockerSave(t, []string{digestOf(layers[0])}, layers...), Options{}, (&recorder{}).imp)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("fewer diff ids than layers: err = %v, want ErrInvalid", err)
	}
}

// TestLayoutLinkOut: a layout directory's blob that is a link leading out
// of it is not followed.
func TestLayoutLinkOut(t *testing.T) {
	layer := plainLayer(twoLayers(t)[0])
	img := makeImage(t, "amd64", v1.Config{}, layer)
	d := writeLayout(t, img, nil)
	h, _ := layer.Digest()
	outside := filepath.Join(t.TempDir(), "outside")
	b, _ := os.ReadFile(blobFile(d, h))
	os.WriteFile(outside, b, 0o644)
	os.Remove(blobFile(d, h))
	if err := os.Symlink(outside, blobFile(d, h)); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if _, err := ReadFile(context.Background(), d, Options{}, rec.imp); !errors.Is(err, ErrInvalid) || rec.count() != 0 {
		t.Fatalf("err = %v (imported %d), want ErrInvalid", err, rec.count())
	}
}

func TestDefaults(t *testing.T) {
	for u, want := range map[string]string{"": "root", "root": "root", "0": "root", "0:0": "root", "root:wheel": "root", "app": "user", "1000": "user", "nobody:nogroup": "user"} {
		if got := Defaults(v1.Config{User: u}).User; got != want {
			t.Errorf("user %q -> %q, want %q", u, got, want)
		}
	}
	d := Defaults(v1.Config{Env: []string{"A=1=2", "NOEQUALS", "=x", "B="}, Cmd: []string{"python3", "-m", "http.server", "", "a b", "$HOME", "x=y"}})
	if len(d.Env) != 2 || d.Env["A"] != "1=2" || d.Env["B"] != "" {
		t.Errorf("env %v", d.Env)
	}
	if want := `python3 -m http.server '' 'a b' '$HOME' 'x=y'`; d.StartCmd != want {
		t.Errorf("start %q, want %q", d.StartCmd, want)
	}
	if d := Defaults(v1.Config{}); d.StartCmd != "" || d.Env != nil || d.Workdir != "" {
		t.Errorf("empty config: %+v", d)
	}
}

// TestZstdAndTrailing: a zstd layer is read; a layer whose tar end is
// followed by more than maxTrailing bytes (a decompression bomb's shape)
// is refused even when the importer stopped reading at the tar's end.
func TestZstdAndTrailing(t *testing.T) {
	layers := twoLayers(t)
	zl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layers[0])), nil },
		tarball.WithMediaType(types.OCILayerZStd), tarball.WithCompression(compression.ZStd))
	if err != nil {
		t.Fatal(err)
	}
	img := makeImage(t, "amd64", baseConfig, zl, plainLayer(layers[1]))
	rec := &recorder{}
	res, err := ReadFile(context.Background(), writeLayout(t, img, nil), Options{}, rec.imp)
	if err != nil {
		t.Fatal(err)
	}
	checkTwoLayers(t, res, rec, layers)

	padded := append(append([]byte(nil), layers[0]...), make([]byte, maxTrailing+1)...)
	img = makeImage(t, "amd64", v1.Config{}, gzipLayer(t, padded))
	stopAtEnd := func(ctx context.Context, r io.Reader) (string, error) {
		tr := tar.NewReader(r)
		for {
			if _, err := tr.Next(); err == io.EOF {
				return digestOf(nil), nil
			} else if err != nil {
				return "", err
			}
		}
	}
	_, err = ReadFile(context.Background(), writeLayout(t, img, nil), Options{}, stopAtEnd)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "follow the tar's end") {
		t.Fatalf("err = %v, want ErrInvalid on the trailing bytes", err)
	}
}

// TestArchiveDotNames: an OCI archive made with tar -C layout . names its
// entries "./..."; it reads the same.
func TestArchiveDotNames(t *testing.T) {
	layers := twoLayers(t)
	img := makeImage(t, "amd64", baseConfig, gzipLayer(t, layers[0]), plainLayer(layers[1]))
	rec := &recorder{}
	res, err := ReadFile(context.Background(), tarDirAs(t, writeLayout(t, img, nil), "./"), Options{}, rec.imp)
	if err != nil {
		t.Fatal(err)
	}
	checkTwoLayers(t, res, rec, layers)
}

// TestCanceled: a canceled import stops with the context's error.
func TestCanceled(t *testing.T) {
	img := makeImage(t, "amd64", baseConfig, plainLayer(twoLayers(t)[0]))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, p := range map[string]string{"layout": writeLayout(t, img, nil), "docker-save": writeDockerSave(t, img)} {
		rec := &recorder{}
		if _, err := ReadFile(ctx, p, Options{}, rec.imp); !errors.Is(err, context.Canceled) || rec.count() != 0 {
			t.Errorf("%s: err = %v (imported %d), want context.Canceled", name, err, rec.count())
		}
	}
}

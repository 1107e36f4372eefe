package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// bombLayer is a gzip'd layer whose config names a made-up diff ID: the
// real one would take decompressing the whole bomb to compute.
type bombLayer struct{ gz []byte }

func (b bombLayer) Digest() (v1.Hash, error) {
	s := sha256.Sum256(b.gz)
	return v1.NewHash("sha256:" + hex.EncodeToString(s[:]))
}
func (b bombLayer) DiffID() (v1.Hash, error) {
	return v1.NewHash("sha256:" + strings.Repeat("0", 64))
}
func (b bombLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.gz)), nil
}
func (b bombLayer) Uncompressed() (io.ReadCloser, error) {
	return nil, errors.New("a bomb is not decompressed here")
}
func (b bombLayer) Size() (int64, error)                { return int64(len(b.gz)), nil }
func (b bombLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// gzipBomb is a gzip stream of a tar whose one file holds size zero bytes,
// as concatenated gzip members (which a gzip reader reads as one stream):
// about a thousandth of size.
func gzipBomb(t *testing.T, size int64) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros", Size: size, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	const chunk = 8 << 20
	out := member(hdr.Bytes())
	zeros := member(make([]byte, chunk))
	for n := int64(0); n < size; n += chunk {
		out = append(out, zeros...)
	}
	return append(out, member(make([]byte, 1024))...)
}

// rchar is the bytes this process has read by read calls, from any file.
func rchar(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// TestGzipBomb: a 4 MiB gzip layer that expands to a 4 GiB file is
// decompressed only as far as the importer reads. The importer stands for
// the layer store at its quota (internal/layer's TestMaxBytes and
// TestSparseBomb): it reads 1 MiB and refuses. The import ends with its
// error, having read a small part of the blob, so no more of the bomb
// than the quota is ever expanded.
func TestGzipBomb(t *testing.T) {
	const quota = 1 << 20
	bomb := gzipBomb(t, 4<<30)
	img := makeImage(t, "amd64", baseConfig, bombLayer{gz: bomb})
	dir := writeLayout(t, img, nil)
	errQuota := errors.New("past the account's quota")
	expanded := int64(0)
	imp := func(ctx context.Context, r io.Reader) (string, error) {
		n, err := io.Copy(io.Discard, io.LimitReader(r, quota+1))
		expanded = n
		if err != nil {
			return "", err
		}
		if n > quota {
			return "", errQuota
		}
		return digestOf(nil), nil
	}
	before := rchar(t)
	_, err := ReadFile(context.Background(), dir, Options{}, imp)
	read := rchar(t) - before
	if !errors.Is(err, errQuota) {
		t.Fatalf("err = %v, want the importer's quota error", err)
	}
	if expanded != quota+1 {
		t.Fatalf("the importer read %d bytes", expanded)
	}
	if read > int64(len(bomb))/4 {
		t.Fatalf("the import read %d bytes, of a %d-byte bomb: it expanded it past the importer's refusal", read, len(bomb))
	}
	t.Logf("read %d bytes of a %d-byte bomb", read, len(bomb))
}

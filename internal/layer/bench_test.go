package layer

import (
	"archive/tar"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkImport imports a layer of about 200 MB: in 20,000 files of 1
// to 20 KiB in 200 directories (many-files), and in 200 files of 1 MiB
// (large-files). Its figure is the import's MB/s: hash, checks,
// extraction and the sync before the layer is marked whole.
//
//	go test ./internal/layer -run '^$' -bench Import -benchtime 3x
func BenchmarkImport(b *testing.B) {
	b.Run("many-files", func(b *testing.B) { benchImport(b, 200, 100, 1<<10, 20<<10) })
	b.Run("large-files", func(b *testing.B) { benchImport(b, 20, 10, 1<<20, 1<<20+1) })
}

func benchImport(b *testing.B, dirs, files, minSize, maxSize int) {
	name := filepath.Join(b.TempDir(), "layer.tar")
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	tw := tar.NewWriter(f)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, maxSize)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("usr/lib/d%03d/", d), Mode: 0o755}); err != nil {
			b.Fatal(err)
		}
		for i := range files {
			n := minSize + rng.IntN(maxSize-minSize)
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("usr/lib/d%03d/f%03d", d, i), Mode: 0o644, Size: int64(n), Uid: 1000, Gid: 1000}
			if err := tw.WriteHeader(hdr); err != nil {
				b.Fatal(err)
			}
			if _, err := tw.Write(buf[:n]); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	size, _ := f.Seek(0, 1)
	f.Close()
	b.SetBytes(size)
	cache := b.TempDir()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s, err := Open(cache)
		if err != nil {
			b.Fatal(err)
		}
		in, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		info, err := s.Import(context.Background(), in, Overlay, Limits{MaxBytes: 1 << 30, MaxEntries: 1 << 20})
		b.StopTimer()
		in.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Remove(info.Digest); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

package layer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/tarx"
	"github.com/withruntime/withruntime/internal/template"
)

// Format is the convention of a layer archive's whiteouts.
type Format int

const (
	// Overlay is overlayfs's own convention, as `runsc tar rootfs-upper`
	// writes a sandbox's upper layer: a removed name is a character device
	// 0:0, an opaque directory carries the PAX record
	// SCHILY.xattr.trusted.overlay.opaque=y.
	Overlay Format = iota + 1
	// OCI is the image layers' convention: .wh.NAME removes NAME,
	// .wh..wh..opq makes its directory opaque. Both are converted to
	// overlayfs's form; device nodes are refused, xattrs all dropped.
	OCI
)

func (f Format) String() string {
	switch f {
	case Overlay:
		return "overlay"
	case OCI:
		return "oci"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Limits bound one import; 0 is no bound. The caller gives them from the
// account's quota and the server's flags.
type Limits struct {
	// MaxBytes bounds the regular files' bytes all together: as their
	// headers announce them (refused before anything of the entry is
	// written) and as they are written.
	MaxBytes int64
	// MaxEntries bounds the archive's headers, every one counted.
	MaxEntries int
	// MaxEntrySize bounds one entry's size (ErrMalformed past it).
	MaxEntrySize int64
}

// Info describes a stored layer.
type Info struct {
	// Digest is "sha256:" and the hex sha256 of the uncompressed tar
	// stream as it was read, trailing padding included.
	Digest string `json:"digest"`
	// SizeBytes is the bytes of its regular files as written (a hard link
	// counts once); directories, links and whiteouts add an inode each,
	// bounded by Limits.MaxEntries.
	SizeBytes int64 `json:"size_bytes"`
	// Entries is the archive's headers.
	Entries int `json:"entries"`
}

// maxTrailing bounds what may follow a tar archive's end-of-archive
// blocks (writers pad to a record, 10240 bytes for tar(1)): the digest
// covers the whole stream, which must therefore end.
const maxTrailing = 1 << 20

const (
	completeMark = ".complete"
	fsDir        = "fs"
)

// Store is the layers under <cacheDir>/templates/layers. Its methods are
// safe for concurrent use; one server owns a cache directory.
type Store struct {
	root string
	mu   sync.Mutex // publish and remove, so that a rename never meets a half-removed layer
}

// Open opens (making it when missing) the store of cacheDir and removes
// what a crash left: imports in progress and layers without .complete.
func Open(cacheDir string) (*Store, error) {
	if cacheDir == "" {
		return nil, errors.New("layer: no cache directory")
	}
	s := &Store{root: filepath.Join(cacheDir, "templates", "layers")}
	for _, d := range []string{filepath.Dir(s.root), s.root, s.digests(), s.tmp()} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	// The layers' files keep the image's modes, setuid ones too: no one
	// but root may reach them on the host.
	for _, d := range []string{s.root, s.digests(), s.tmp()} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	tmp, err := os.ReadDir(s.tmp())
	if err != nil {
		return nil, err
	}
	for _, e := range tmp {
		if err := os.RemoveAll(filepath.Join(s.tmp(), e.Name())); err != nil {
			return nil, err
		}
	}
	layers, err := os.ReadDir(s.digests())
	if err != nil {
		return nil, err
	}
	for _, e := range layers {
		dir := filepath.Join(s.digests(), e.Name())
		if _, err := os.Lstat(filepath.Join(dir, completeMark)); errors.Is(err, fs.ErrNotExist) {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func (s *Store) digests() string { return filepath.Join(s.root, "sha256") }
func (s *Store) tmp() string     { return filepath.Join(s.root, "tmp") }

// layerDir is the directory of a layer, from a checked digest only.
func (s *Store) layerDir(digest string) (string, error) {
	if !template.ValidDigest(digest) {
		return "", fmt.Errorf("layer: %q is not a sha256 digest", digest)
	}
	return filepath.Join(s.digests(), strings.TrimPrefix(digest, "sha256:")), nil
}

// StacksDir is where what is made of a whole stack of layers is kept
// (<dir>/templates/stacks, named by StackKey: a microVM's disk of a
// template). The store does not write there; whoever makes a stack's
// file does, and Collect (internal/templates) removes those of stacks no
// template names.
func (s *Store) StacksDir() string { return filepath.Join(filepath.Dir(s.root), "stacks") }

// Dir returns the fs directory of the complete layer digest: the lower
// directory to mount. A layer not stored is an error that is
// fs.ErrNotExist.
func (s *Store) Dir(digest string) (string, error) {
	dir, err := s.layerDir(digest)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(filepath.Join(dir, completeMark)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("layer %s is not stored: %w", digest, fs.ErrNotExist)
		}
		return "", err
	}
	return filepath.Join(dir, fsDir), nil
}

// Has says whether the layer digest is stored complete.
func (s *Store) Has(digest string) bool {
	_, err := s.Dir(digest)
	return err == nil
}

// Stat returns the stored layer's Info (fs.ErrNotExist when it is not).
func (s *Store) Stat(digest string) (Info, error) {
	dir, err := s.layerDir(digest)
	if err != nil {
		return Info{}, err
	}
	return readInfo(dir, digest)
}

func readInfo(dir, digest string) (Info, error) {
	b, err := os.ReadFile(filepath.Join(dir, completeMark))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Info{}, fmt.Errorf("layer %s is not stored: %w", digest, fs.ErrNotExist)
		}
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("layer %s: %s: %w", digest, completeMark, err)
	}
	info.Digest = digest
	return info, nil
}

// List returns the stored layers, by digest.
func (s *Store) List() ([]Info, error) {
	entries, err := os.ReadDir(s.digests())
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range entries {
		digest := "sha256:" + e.Name()
		if !template.ValidDigest(digest) {
			continue
		}
		info, err := readInfo(filepath.Join(s.digests(), e.Name()), digest)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

// Usage is the SizeBytes of every stored layer together.
func (s *Store) Usage() (int64, error) {
	infos, err := s.List()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, i := range infos {
		n += i.SizeBytes
	}
	return n, nil
}

// Remove removes the layer digest; removing one not stored is no error.
// The caller makes sure no template, sandbox or mount uses it.
func (s *Store) Remove(digest string) error {
	dir, err := s.layerDir(digest)
	if err != nil {
		return err
	}
	trash, err := os.MkdirTemp(s.tmp(), "remove-")
	if err != nil {
		return err
	}
	s.mu.Lock()
	// The rename takes the layer out whole: a crash in RemoveAll leaves
	// only a tmp entry, which Open removes.
	err = os.Rename(dir, filepath.Join(trash, "layer"))
	s.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(trash)
		return err
	}
	return os.RemoveAll(trash)
}

// Import extracts the layer archive r (an uncompressed tar: a gzip'd
// image layer is the caller's to decompress) in the format f within lim,
// and stores it under its digest. A layer already stored is kept and the
// new copy discarded. On any error nothing of the import is left.
//
// Errors refusing the archive are *tarx.Error: errors.Is
// tarx.ErrUnsafe, tarx.ErrTooLarge, tarx.ErrMalformed or
// tarx.ErrDestination. Otherwise ctx's error, or the host's (a full disk).
func (s *Store) Import(ctx context.Context, r io.Reader, f Format, lim Limits) (info Info, err error) {
	if f != Overlay && f != OCI {
		return Info{}, fmt.Errorf("layer: unknown format %v", f)
	}
	tmp, err := os.MkdirTemp(s.tmp(), "import-")
	if err != nil {
		return Info{}, err
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Mkdir(filepath.Join(tmp, fsDir), 0o755); err != nil {
		return Info{}, err
	}
	root, err := os.OpenRoot(filepath.Join(tmp, fsDir))
	if err != nil {
		return Info{}, err
	}
	defer root.Close()

	h := sha256.New()
	in := &reader{ctx: ctx, r: r, h: h}
	ex := newExtractor(ctx, root, in, f, lim)
	if err := ex.run(); err != nil {
		return Info{}, err
	}
	if in.n == 0 {
		return Info{}, refuse(tarx.ErrMalformed, "the layer archive is empty")
	}
	// An archive ends with zero blocks; one cut between two entries reads
	// as ended to archive/tar, but its last block is a header or data.
	if in.tail != [512]byte{} {
		return Info{}, refuse(tarx.ErrMalformed, "the layer archive is truncated: it has no end-of-archive blocks")
	}
	// The rest of the stream (end-of-archive blocks, record padding)
	// belongs to the digest too.
	rest, err := io.Copy(io.Discard, io.LimitReader(in, maxTrailing+1))
	if err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		return Info{}, &tarx.Error{Kind: tarx.ErrMalformed, Msg: "reading the layer archive's end: " + err.Error(), Err: err}
	}
	if rest > maxTrailing {
		return Info{}, refuse(tarx.ErrMalformed, "more than %d bytes follow the layer archive's end", maxTrailing)
	}
	info = Info{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), SizeBytes: ex.written, Entries: ex.x.Entries}

	// The files reach the disk before the mark says they are whole.
	if err := syncfs(tmp); err != nil {
		return Info{}, err
	}
	mark, err := json.Marshal(info)
	if err != nil {
		return Info{}, err
	}
	if err := writeSync(filepath.Join(tmp, completeMark), mark); err != nil {
		return Info{}, err
	}
	dst, err := s.layerDir(info.Digest)
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = os.Rename(tmp, dst)
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		// Stored already (every stored layer is complete: it arrives by
		// this rename): keep that one.
		return readInfo(dst, info.Digest)
	}
	if err != nil {
		return Info{}, err
	}
	tmp = ""
	if err := syncDir(s.digests()); err != nil {
		return Info{}, err
	}
	return info, nil
}

// reader hashes what the extraction reads, keeps its last block and stops
// it when ctx ends.
type reader struct {
	ctx  context.Context
	r    io.Reader
	h    io.Writer
	n    int64
	tail [512]byte // the last 512 bytes read
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if n >= len(r.tail) {
		copy(r.tail[:], p[n-len(r.tail):n])
	} else {
		copy(r.tail[:], r.tail[n:])
		copy(r.tail[len(r.tail)-n:], p[:n])
	}
	return n, err
}

func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

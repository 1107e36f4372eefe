package build

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// CacheKey is the content key of step run on parent: a rebuild whose step
// has the key of a finished one reuses that one's result instead of running
// it. parent is the key of the step before, or, for the first step, what
// names the base exactly (the base template's id or top layer digest, an
// image's manifest digest); chaining keys this way makes a step's key
// cover every step before it, including env, workdir and user steps, which
// change what a later run sees without changing files. files maps context
// paths to the entry digests HashContext returns; only the entries a copy
// step takes (its src and what is beneath it) count, so an unrelated file
// of the context changing leaves the key alone.
//
// The key is "sha256:" and the hex SHA-256 of a canonical encoding: a
// sequence of netstrings ("<decimal length>:<bytes>,"), in this order:
// "withruntime/build-step/v1", parent, the step's kind; then by kind the
// number of packages and each package (npm: then "global" or "local"); a
// run's command and user; a copy's cleaned src, dest, user, mode, the
// number of files it takes and each file's context path and digest in
// byte order of the paths; an env's number of variables and each name and
// value in byte order of the names; a workdir; a user. Netstrings make the
// encoding unambiguous (no value can pass for a boundary); v1 changes to v2
// if the encoding ever does, so no old key matches a new meaning.
func CacheKey(parent string, step Step, files map[string]string) string {
	h := sha256.New()
	ns := func(s string) { fmt.Fprintf(h, "%d:%s,", len(s), s) }
	list := func(l []string) {
		ns(strconv.Itoa(len(l)))
		for _, s := range l {
			ns(s)
		}
	}
	ns("withruntime/build-step/v1")
	ns(parent)
	kind := step.Kind()
	ns(kind)
	switch kind {
	case KindApt:
		list(step.AptInstall)
	case KindPip:
		list(step.PipInstall)
	case KindNpm:
		list(step.NpmInstall)
		if step.Global {
			ns("global")
		} else {
			ns("local")
		}
	case KindRun:
		ns(step.Run)
		ns(step.User)
	case KindCopy:
		c := step.Copy
		src := strings.TrimSuffix(c.Src, "/")
		ns(src)
		ns(c.Dest)
		ns(c.User)
		ns(c.Mode)
		var taken []string
		for p := range files {
			if under(p, src) {
				taken = append(taken, p)
			}
		}
		slices.Sort(taken)
		ns(strconv.Itoa(len(taken)))
		for _, p := range taken {
			ns(p)
			ns(files[p])
		}
	case KindEnv:
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range step.Env {
				if !yield(k) {
					return
				}
			}
		})
		ns(strconv.Itoa(len(names)))
		for _, k := range names {
			ns(k)
			ns(step.Env[k])
		}
	case KindWorkdir:
		ns(step.Workdir)
	case KindUser:
		ns(step.User)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// under reports whether context path p is src or beneath it.
func under(p, src string) bool {
	return src == "." || p == src || strings.HasPrefix(p, src+"/")
}

// ContextLimits bound what HashContext reads of a build context.
type ContextLimits struct {
	MaxEntries int   // files, directories and symlinks
	MaxBytes   int64 // the sum of the files' sizes
}

// DefaultContextLimits are the bounds of a build context's copy steps.
var DefaultContextLimits = ContextLimits{MaxEntries: 100_000, MaxBytes: 8 << 30}

// ErrContextLimit is returned (wrapped) when a context passes its bounds.
var ErrContextLimit = errors.New("build context too large")

// HashContext hashes what a copy step of src takes from the build context
// in dir: src and, for a directory, everything beneath it. It returns the
// context path ("app/main.py"; "." for the context itself) of every entry
// with its digest, for CacheKey. The context is untrusted (the client sent
// it): it is read through an os.Root, so no name leads out of dir, a
// symlink is hashed as a symlink (its target's text) and never followed,
// a file is checked to be the one Lstat saw when it is opened, and entries
// other than files, directories and symlinks are refused. The walk stops
// with ErrContextLimit past lim.
//
// An entry's digest is the hex SHA-256 of netstrings (see CacheKey):
// "withruntime/build-file/v1", its type ("file", "dir", "symlink"), its
// permission bits with setuid, setgid and sticky in octal, and the hex
// SHA-256 of a file's content or a symlink's target. Owners and times are
// not part of it: a copy step sets the owner, and a rebuild's checkout may
// have any times.
func HashContext(dir, src string, lim ContextLimits) (map[string]string, error) {
	src, err := contextPath(src)
	if err != nil {
		return nil, &Error{Field: "copy.src", Msg: err.Error()}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the build context: %w", err)
	}
	defer root.Close()
	w := &walker{root: root, lim: lim, out: map[string]string{}}
	if err := w.walk(src); err != nil {
		return nil, err
	}
	return w.out, nil
}

type walker struct {
	root  *os.Root
	lim   ContextLimits
	bytes int64
	out   map[string]string
}

func (w *walker) walk(name string) error {
	if len(w.out) >= w.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrContextLimit, w.lim.MaxEntries)
	}
	fi, err := w.root.Lstat(name)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	mode := strconv.FormatUint(uint64(fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)), 8)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := w.root.Readlink(name)
		if err != nil {
			return fmt.Errorf("build context: %w", err)
		}
		w.out[name] = entryDigest("symlink", mode, target)
	case fi.IsDir():
		w.out[name] = entryDigest("dir", mode, "")
		f, err := w.open(name, fi)
		if err != nil {
			return err
		}
		var names []string
		for {
			// Read in pages, so a directory of a billion names stops at
			// the bound instead of being listed whole.
			ents, err := f.ReadDir(1024)
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if len(w.out)+len(names) > w.lim.MaxEntries {
				f.Close()
				return fmt.Errorf("%w: more than %d entries", ErrContextLimit, w.lim.MaxEntries)
			}
			if err == io.EOF || len(ents) == 0 {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("build context: %w", err)
			}
		}
		f.Close()
		slices.Sort(names)
		for _, n := range names {
			if err := w.walk(path.Join(name, n)); err != nil {
				return err
			}
		}
	case fi.Mode().IsRegular():
		f, err := w.open(name, fi)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		left := w.lim.MaxBytes - w.bytes
		n, err := io.Copy(h, io.LimitReader(f, left+1))
		if err != nil {
			return fmt.Errorf("build context: reading %s: %w", name, err)
		}
		if n > left {
			return fmt.Errorf("%w: more than %d bytes", ErrContextLimit, w.lim.MaxBytes)
		}
		w.bytes += n
		w.out[name] = entryDigest("file", mode, hexSum(h))
	default:
		return &Error{Field: "copy.src", Msg: fmt.Sprintf("%s in the build context is not a file, directory or symlink", name)}
	}
	return nil
}

// open opens name and checks it is still what Lstat saw: an entry swapped
// for a symlink in between would otherwise be followed.
func (w *walker) open(name string, seen fs.FileInfo) (*os.File, error) {
	f, err := w.root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !os.SameFile(seen, st) {
		f.Close()
		return nil, fmt.Errorf("build context: %s changed while it was read", name)
	}
	return f, nil
}

func entryDigest(typ, mode, content string) string {
	h := sha256.New()
	for _, s := range []string{"withruntime/build-file/v1", typ, mode, content} {
		fmt.Fprintf(h, "%d:%s,", len(s), s)
	}
	return hexSum(h)
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

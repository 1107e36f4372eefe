package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"io"
	"path"
	"strings"
	"time"
)

// The sandbox's account, as the agent (internal/agent.DefaultConfig) and
// the default image (internal/image.Default) have it.
const (
	sandboxUID  = 1000
	sandboxGID  = 1000
	sandboxName = "user"
	sandboxHome = "home/user"
	workspace   = "workspace"
)

// caBundles are where the usual distributions keep their CA roots
// (Debian, Ubuntu and Alpine's ca-certificates; Fedora and RHEL; Alpine
// and others' cert.pem). One of them present means the image has roots.
var caBundles = []string{
	"etc/ssl/certs/ca-certificates.crt",
	"etc/pki/tls/certs/ca-bundle.crt",
	"etc/ssl/cert.pem",
}

// sudoBinaries are where sudo lives; bin is often a link to usr/bin.
var sudoBinaries = []string{"usr/bin/sudo", "bin/sudo"}

// Paths the platform layer writes or looks at. The tracker follows these
// and their parents only.
var watched = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range append(append([]string{
		"etc/passwd", "etc/group", "etc/sudoers.d/withruntime", "etc/hosts", "etc/hostname",
		sandboxHome, workspace, "tmp", "proc", "dev", "sys",
		"opt/withruntime", "run/withruntime",
	}, caBundles...), sudoBinaries...) {
		for ; p != "."; p = path.Dir(p) {
			m[p] = true
		}
	}
	return m
}()

// node is the last entry at a watched path across the layers so far.
type node struct {
	typ    byte
	layer  int
	mode   int64
	uid    int
	gid    int
	mtime  time.Time
	known  bool   // false for a directory only implied by an entry below it
	data   []byte // the content of /etc/passwd and /etc/group
	tooBig bool
}

// tracker follows the image's file system at the watched paths as the
// layers pass: later layers replace earlier entries, whiteouts remove
// them and what is below them, opaque directories hide what lower layers
// had below them.
type tracker struct {
	nodes map[string]*node
}

func newTracker() *tracker { return &tracker{nodes: map[string]*node{}} }

// cleanName turns a tar name into a path relative to the root ("" for
// the root itself, ok false for a name outside the tree, which the layer
// store refuses anyway).
func cleanName(name string) (string, bool) {
	p := path.Clean("/" + name)
	if strings.Contains(name, "\x00") {
		return "", false
	}
	return strings.TrimPrefix(p, "/"), true
}

// dropBelow forgets the entries under p (and p itself when self) that
// layers below layer made.
func (t *tracker) dropBelow(p string, layer int, self bool) {
	for q, n := range t.nodes {
		if n.layer >= layer {
			continue
		}
		if self && q == p || p == "" || strings.HasPrefix(q, p+"/") {
			delete(t.nodes, q)
		}
	}
}

// scanLayer reads layer i's tar to its end.
func (t *tracker) scanLayer(i int, tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, ok := cleanName(hdr.Name)
		if !ok || name == "" {
			continue
		}
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		switch {
		case base == ".wh..wh..opq":
			t.dropBelow(dir, i, false)
			continue
		case strings.HasPrefix(base, ".wh."):
			t.dropBelow(path.Join(dir, base[len(".wh."):]), i, true)
			continue
		}
		// An entry makes its parents directories (implied ones when the
		// layer has no entry for them).
		for p := dir; p != "" && p != "."; p = path.Dir(p) {
			if !watched[p] {
				continue
			}
			if n := t.nodes[p]; n == nil || n.typ != tar.TypeDir {
				t.dropBelow(p, i, true)
				t.nodes[p] = &node{typ: tar.TypeDir, layer: i, mode: 0o755}
			}
		}
		if hdr.Typeflag != tar.TypeDir {
			// A file hides whatever lower layers had below its name.
			t.dropBelow(name, i, false)
		}
		if !watched[name] {
			continue
		}
		n := &node{typ: hdr.Typeflag, layer: i, mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime, known: true}
		if n.typ == tar.TypeRegA {
			n.typ = tar.TypeReg
		}
		if (name == "etc/passwd" || name == "etc/group") && n.typ == tar.TypeReg {
			data, err := io.ReadAll(io.LimitReader(tr, maxAccountFile+1))
			if err != nil {
				return err
			}
			if len(data) > maxAccountFile {
				n.tooBig = true
			} else {
				n.data = data
			}
		}
		t.nodes[name] = n
	}
}

// has reports whether the image has something at p.
func (t *tracker) has(p string) bool { return t.nodes[p] != nil }

// creatable reports whether every parent of p is a directory or absent:
// an entry below a link or a file would replace it in the merged tree.
func (t *tracker) creatable(p string) bool {
	for q := path.Dir(p); q != "."; q = path.Dir(q) {
		if n := t.nodes[q]; n != nil && n.typ != tar.TypeDir {
			return false
		}
	}
	return true
}

// epoch is every new entry's time: the platform layer's bytes depend on
// the image alone, so the same image stores it once.
var epoch = time.Unix(0, 0).UTC()

type layerWriter struct {
	t       *tracker
	tw      *tar.Writer
	written map[string]bool
}

// dir writes directory p: the image's own entry again when it has one (an
// upper layer's directory shows its owner and mode over the lower ones'),
// else a new one of mode, uid and gid. Its parents come first.
func (w *layerWriter) dir(p string, mode int64, uid, gid int) error {
	if w.written[p] {
		return nil
	}
	if q := path.Dir(p); q != "." {
		if err := w.dir(q, 0o755, 0, 0); err != nil {
			return err
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: epoch, Format: tar.FormatPAX}
	if n := w.t.nodes[p]; n != nil && n.known {
		hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime = n.mode, n.uid, n.gid, n.mtime
	}
	w.written[p] = true
	return w.tw.WriteHeader(hdr)
}

func (w *layerWriter) file(p string, data []byte, mode int64, uid, gid int, mtime time.Time) error {
	if err := w.dir(path.Dir(p), 0o755, 0, 0); err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// newDir writes directory p when the image lacks it and may have it.
func (w *layerWriter) newDir(p string, mode int64, uid, gid int) error {
	if w.t.has(p) || !w.t.creatable(p) {
		return nil
	}
	return w.dir(p, mode, uid, gid)
}

// newFile writes file p when the image lacks it and may have it.
func (w *layerWriter) newFile(p string, data []byte, mode int64) error {
	if w.t.has(p) || !w.t.creatable(p) {
		return nil
	}
	return w.file(p, data, mode, 0, 0, epoch)
}

// accountFile writes /etc/passwd or /etc/group with line appended when the
// image's has no entry named user; a fresh one (fresh, then line) when the
// image has none, or a link or anything but a plain file there.
func (w *layerWriter) accountFile(p, fresh, line string) error {
	n := w.t.nodes[p]
	if n != nil && n.tooBig {
		return invalidf("/%s is larger than %d bytes", p, maxAccountFile)
	}
	if !w.t.creatable(p) {
		return nil
	}
	if n == nil || n.typ != tar.TypeReg {
		return w.file(p, []byte(fresh+line), 0o644, 0, 0, epoch)
	}
	if hasEntry(n.data, sandboxName) {
		return nil
	}
	data := append([]byte(nil), n.data...)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	return w.file(p, append(data, line...), n.mode, n.uid, n.gid, n.mtime)
}

// hasEntry reports whether an account file has a line for name.
func hasEntry(data []byte, name string) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxAccountFile+1)
	for sc.Scan() {
		if n, _, ok := strings.Cut(sc.Text(), ":"); ok && n == name {
			return true
		}
	}
	return false
}

// platformLayer writes what a sandbox needs that the image lacks (doc.go
// lists it).
func (t *tracker) platformLayer(opts Options) ([]byte, error) {
	var buf bytes.Buffer
	w := &layerWriter{t: t, tw: tar.NewWriter(&buf), written: map[string]bool{}}
	steps := []func() error{
		func() error {
			return w.accountFile("etc/passwd", "root:*:0:0:root:/root:/bin/sh\n", "user:*:1000:1000:user:/home/user:/bin/sh\n")
		},
		func() error { return w.accountFile("etc/group", "root:x:0:\n", "user:x:1000:\n") },
		func() error { return w.newDir("home", 0o755, 0, 0) },
		func() error { return w.newDir(sandboxHome, 0o755, sandboxUID, sandboxGID) },
		func() error { return w.newDir(workspace, 0o755, sandboxUID, sandboxGID) },
		func() error { return w.newDir("tmp", 0o1777, 0, 0) },
		func() error { return w.newDir("proc", 0o555, 0, 0) },
		func() error { return w.newDir("dev", 0o755, 0, 0) },
		func() error { return w.newDir("sys", 0o555, 0, 0) },
		func() error { return w.newDir("opt/withruntime", 0o755, 0, 0) },
		func() error { return w.newDir("run/withruntime", 0o755, 0, 0) },
		func() error { return w.newFile("etc/hostname", []byte("sandbox\n"), 0o644) },
		func() error {
			return w.newFile("etc/hosts", []byte("127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n"), 0o644)
		},
		func() error {
			if !t.hasSudo() {
				return nil
			}
			if n := t.nodes["etc/sudoers.d"]; n != nil && n.typ != tar.TypeDir {
				return nil
			}
			return w.newFile("etc/sudoers.d/withruntime", []byte("user ALL=(ALL) NOPASSWD:ALL\n"), 0o440)
		},
		func() error {
			if opts.CARoots == nil {
				return nil
			}
			for _, p := range caBundles {
				if t.has(p) {
					return nil
				}
			}
			return w.newFile(caBundles[0], opts.CARoots, 0o644)
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := w.tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// hasSudo reports whether the image has sudo or a sudoers.d directory.
func (t *tracker) hasSudo() bool {
	if n := t.nodes["etc/sudoers.d"]; n != nil && n.typ == tar.TypeDir {
		return true
	}
	for _, p := range sudoBinaries {
		if t.has(p) {
			return true
		}
	}
	return false
}

package agent

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
)

// handleArchiveGet streams a PAX tar of a directory tree (entry names
// relative to the directory, which itself is not an entry) or of one file
// (a single entry named after it). Symlinks are stored, never followed;
// only regular files, directories and symlinks are stored. It reads as
// ?user=: what that user may not read is refused (forbidden) before the
// stream starts when it is the file or directory asked for, and cuts the
// stream when it is found inside the tree.
func (s *Server) handleArchiveGet(w http.ResponseWriter, r *http.Request) error {
	return s.asUser(w, r, s.archiveGet)
}

func (s *Server) archiveGet(w http.ResponseWriter, r *http.Request, _ identity) error {
	root, err := s.pathParam(r)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	// Ask the kernel before the status is sent, while a refusal can still
	// be answered as one.
	if fi.IsDir() || fi.Mode().IsRegular() {
		f, err := os.OpenFile(root, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		f.Close()
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	if fi.IsDir() {
		err = writeTree(tw, root)
	} else {
		err = writeEntry(tw, root, filepath.Base(root), fi)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		// The status is sent: cut the stream so that the client sees a
		// broken archive rather than a short one that looks whole.
		panic(http.ErrAbortHandler)
	}
	return nil
}

func writeTree(tw *tar.Writer, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil || path == root {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return writeEntry(tw, path, filepath.ToSlash(rel), fi)
	})
}

// writeEntry writes one entry; other kinds of file (sockets, FIFOs,
// devices) are left out.
func writeEntry(tw *tar.Writer, path, name string, fi fs.FileInfo) error {
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(unixMode(fi.Mode())),
		ModTime: fi.ModTime(),
		Format:  tar.FormatPAX,
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		hdr.Typeflag = tar.TypeReg
		hdr.Size = fi.Size()
	case m.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	default:
		return nil
	}
	if hdr.Typeflag != tar.TypeReg {
		return tw.WriteHeader(hdr)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that grew is cut at its size; one that shrank fails the copy.
	_, err = io.CopyN(tw, f, hdr.Size)
	return err
}

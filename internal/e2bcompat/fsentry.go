package e2bcompat

import (
	"io/fs"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/withruntime/withruntime/api"
	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
)

// entryInfo is fi as E2B's clients read it. An agent older than
// FileInfo's owner and group reports neither: then they name the user the
// call acts as (right for what that user made, an approximation
// elsewhere).
func entryInfo(fi api.FileInfo, user string) *fspb.EntryInfo {
	e := &fspb.EntryInfo{
		Name:         fi.Name,
		Type:         fileType(fi.Type),
		Path:         fi.Path,
		Size:         fi.Size,
		Mode:         fi.Mode & 0o7777,
		Permissions:  permissions(fi.Type, fi.Mode),
		Owner:        user,
		Group:        user,
		ModifiedTime: timestamppb.New(fi.ModTime),
		Metadata:     fileMetadata(fi.Attrs),
	}
	if fi.Owner != "" {
		e.Owner = fi.Owner
	}
	if fi.Group != "" {
		e.Group = fi.Group
	}
	if fi.ModTime.IsZero() {
		e.ModifiedTime = timestamppb.New(time.Unix(0, 0))
	}
	// A link followed to its target (followLink) keeps its target's type
	// and is still a link.
	if fi.Type == api.FileTypeSymlink || fi.Target != "" {
		e.IsSymlink = true
		t := fi.Target
		e.SymlinkTarget = &t
	}
	return e
}

func fileType(t string) fspb.FileType {
	switch t {
	case api.FileTypeFile:
		return fspb.FileType_FILE_TYPE_FILE
	case api.FileTypeDir:
		return fspb.FileType_FILE_TYPE_DIRECTORY
	case api.FileTypeSymlink:
		return fspb.FileType_FILE_TYPE_SYMLINK
	}
	// Devices, sockets, pipes: the clients skip type 0 in listings.
	return fspb.FileType_FILE_TYPE_UNSPECIFIED
}

// permissions is the ls-style string ("-rw-r--r--", "drwxr-xr-x") of a
// file of type t with unix mode bits mode, as Go's FileMode writes it
// (which is what E2B's own daemon sends).
func permissions(t string, mode uint32) string {
	m := fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch t {
	case api.FileTypeDir:
		m |= fs.ModeDir
	case api.FileTypeSymlink:
		m |= fs.ModeSymlink
	case api.FileTypeOther:
		m |= fs.ModeIrregular
	}
	return m.String()
}

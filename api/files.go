package api

import "time"

// File types in FileInfo.Type.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeOther   = "other"
)

// FileInfo describes one file inside a sandbox. Path is absolute, inside
// the sandbox.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	Target  string    `json:"target,omitempty"`
	// Owner and Group name the file's owner and group as the sandbox's
	// /etc/passwd and /etc/group have them (the decimal id where they
	// name none). Empty from agents older than these fields.
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	// Attrs are the file's extended attributes in the user namespace,
	// named without the "user." prefix (set with ?attr=NAME=VALUE on a
	// write). Attributes over MaxFileAttrBytes in all, or whose value is
	// not text, are left out.
	Attrs map[string]string `json:"attrs,omitempty"`
}

// MaxFileAttrBytes bounds the attributes one write sets (names, with
// their "user." prefix, plus values) and those FileInfo.Attrs reports.
const MaxFileAttrBytes = 4096

// FileList is the body of GET /v1/sandboxes/{id}/files/list.
type FileList struct {
	Entries []FileInfo `json:"entries"`
	// Truncated says the directory holds more entries than the limit
	// asked (?limit=N): Entries are N of them, not all.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxListLimit bounds ?limit= of GET /v1/sandboxes/{id}/files/list.
const MaxListLimit = 100000

// ArchiveResult is the body answering PUT /v1/sandboxes/{id}/archive.
type ArchiveResult struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// MaxFileBody bounds a single-file upload; larger trees go as an archive.
const MaxFileBody = 512 << 20

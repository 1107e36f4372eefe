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
}

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

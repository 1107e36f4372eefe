package api

import "time"

// The volumes' routes (internal/volume):
//
//	POST   /v1/volumes                    CreateVolumeRequest -> 201 Volume
//	GET    /v1/volumes                    -> VolumeList
//	GET    /v1/volumes/{name}             -> Volume
//	DELETE /v1/volumes/{name}             -> 204 (409 conflict while a live or paused sandbox mounts it)
//	GET    /v1/volumes/{name}/files       ?path= -> file bytes, or VolumeFileList for a directory
//	PUT    /v1/volumes/{name}/files       ?path= body bytes -> 204 (parents are made)
//	DELETE /v1/volumes/{name}/files       ?path= -> 204 (a file, a link or an empty directory)
//	GET    /v1/volumes/{name}/archive     ?path= -> application/x-tar stream
//	PUT    /v1/volumes/{name}/archive     ?path= body application/x-tar -> 204 (extracted into directory path)

// CreateVolumeRequest is the body of POST /v1/volumes.
type CreateVolumeRequest struct {
	Name    string `json:"name"`
	SizeGiB int    `json:"size_gib"`
}

// Volume is a named persistent volume as the API shows it.
type Volume struct {
	Name      string    `json:"name"`
	SizeGiB   int       `json:"size_gib"`
	UsedBytes int64     `json:"used_bytes"`
	CreatedAt time.Time `json:"created_at"`
	// MountedBy are the live and paused sandboxes that mount it.
	MountedBy []string `json:"mounted_by"`
}

// VolumeList is the body of GET /v1/volumes, by name.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// VolumeMount is one volume a create mounts (CreateSandboxRequest.Volumes)
// and a sandbox shows.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// VolumeEntry is one name in a volume's directory.
type VolumeEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file", "dir", "symlink" or "other"
	Size int64  `json:"size"`
	// Mode is the permission bits (0o7777); UID and GID the owner as the
	// sandbox sees it; MTime the last change of its contents.
	Mode  uint32    `json:"mode"`
	UID   uint32    `json:"uid"`
	GID   uint32    `json:"gid"`
	MTime time.Time `json:"mtime"`
}

// VolumeFileList is GET /v1/volumes/{name}/files of a directory.
type VolumeFileList struct {
	Entries []VolumeEntry `json:"entries"`
}

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// RunDir is where a backend keeps the runtime state (sockets, pid files,
// mount points) of dataDir's sandboxes: under root, in a directory named by
// a short hash of the data dir, so that two servers never share one and a
// long data dir still gives socket paths within the kernel's limit.
func RunDir(root, dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join(root, hex.EncodeToString(sum[:])[:12])
}

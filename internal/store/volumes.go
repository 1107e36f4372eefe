package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Volume is the record of a named persistent volume (internal/volume): an
// account holds at most one of each name. Its bytes are an image on Node.
type Volume struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Name      string    `json:"name"`
	SizeGiB   int       `json:"size_gib"`
	CreatedAt time.Time `json:"created_at"`
	// Node is the node that holds the image ("" on a single box).
	Node string `json:"node,omitempty"`
}

// Volumes keeps the volumes' records.
type Volumes interface {
	// PutVolume inserts v. A volume of v's account with v's name, or any
	// with v's ID, is a conflict-kind error.
	PutVolume(ctx context.Context, v Volume) error
	// GetVolume returns account's volume name.
	GetVolume(ctx context.Context, account, name string) (*Volume, error)
	// ListVolumes returns account's volumes by name (every account's, by
	// account then name, when account is "").
	ListVolumes(ctx context.Context, account string) ([]Volume, error)
	// DeleteVolume removes account's volume name's record.
	DeleteVolume(ctx context.Context, account, name string) error
}

// encodeVolume checks v and encodes it for a write.
func encodeVolume(ctx context.Context, v Volume) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkVolume(v); err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding volume %s: %w", v.Name, err)
	}
	return data, nil
}

func checkVolume(v Volume) error {
	switch {
	case v.ID == "" || strings.IndexByte(v.ID, 0) >= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "volume needs an id without NUL bytes")
	case v.Account == "" || strings.IndexByte(v.Account, 0) >= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "volume needs an account without NUL bytes")
	case v.Name == "" || strings.IndexByte(v.Name, 0) >= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "volume needs a name without NUL bytes")
	}
	return nil
}

func volumeNotFound(name string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "volume %s not found", name)
}

package templates

import (
	"errors"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/tarx"
)

// storeAll selects every template record, removed ones too.
var storeAll = store.TemplateFilter{Deleted: true}

// layerError is a refused layer archive as the API answers it: past its
// bounds is payload_too_large, anything unsafe or broken invalid_request.
// Other errors (the disk) stay internal.
func layerError(err error) error {
	var se *sandbox.Error
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, tarx.ErrTooLarge):
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "a template layer may not hold this much: %v", err)
	case errors.Is(err, tarx.ErrUnsafe), errors.Is(err, tarx.ErrMalformed), errors.Is(err, tarx.ErrDestination):
		return sandbox.Errorf(sandbox.KindInvalid, "the layer was refused: %v", err)
	}
	return err
}

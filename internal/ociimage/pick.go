package ociimage

import (
	"bytes"
	"context"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The platform sandboxes run.
var want = v1.Platform{OS: "linux", Architecture: "amd64"}

func isIndex(mt types.MediaType) bool {
	return mt == types.OCIImageIndex || mt == types.DockerManifestList
}

func isManifest(mt types.MediaType) bool {
	return mt == types.OCIManifestSchema1 || mt == types.DockerManifestSchema2
}

// pickImage chooses the image of an index (raw) to import: the first
// linux/amd64 image, else its only entry (an OCI layout of one image
// names no platform), following nested indexes. fetch reads the index a
// descriptor names.
func pickImage(ctx context.Context, raw []byte, fetch func(v1.Descriptor) ([]byte, error)) (v1.Descriptor, error) {
	for depth := 0; ; depth++ {
		if err := ctx.Err(); err != nil {
			return v1.Descriptor{}, err
		}
		idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return v1.Descriptor{}, invalidf("index: %v", err)
		}
		var plain []v1.Descriptor
		var seen []string
		for _, m := range idx.Manifests {
			if m.Platform == nil {
				plain = append(plain, m)
				continue
			}
			seen = append(seen, m.Platform.String())
			if isManifest(m.MediaType) && m.Platform.OS == want.OS && m.Platform.Architecture == want.Architecture {
				return m, nil
			}
		}
		if len(plain) != 1 {
			if len(plain) == 0 {
				return v1.Descriptor{}, invalidf("no linux/amd64 image in the index (it has %s)", strings.Join(seen, ", "))
			}
			return v1.Descriptor{}, invalidf("the index holds %d images that name no platform; an import takes one", len(plain))
		}
		d := plain[0]
		switch {
		case isManifest(d.MediaType):
			return d, nil
		case !isIndex(d.MediaType):
			return v1.Descriptor{}, invalidf("media type %q is neither an image manifest nor an index", d.MediaType)
		case depth+1 >= maxIndexDepth:
			return v1.Descriptor{}, invalidf("indexes nested more than %d deep", maxIndexDepth)
		}
		if raw, err = fetch(d); err != nil {
			return v1.Descriptor{}, err
		}
	}
}

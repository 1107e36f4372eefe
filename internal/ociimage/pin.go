package ociimage

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pin asks ref's registry for the digest of what ref names now (a HEAD of
// its manifest or index, a GET where the HEAD answers no digest) and
// returns that digest and ref pinned to it ("registry/repo@sha256:..."):
// ReadRemote of the pinned reference reads exactly that content, however
// the tag moves meanwhile, so what was asked and what is imported agree.
// A reference that names a digest is pinned already and is not asked for.
// The registry's address is checked as ReadRemote checks it.
func Pin(ctx context.Context, ref string, opts Options) (pinned, digest string, err error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", "", fmt.Errorf("%w: reference %q: %v", ErrInvalid, ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return r.Context().Digest(d.DigestStr()).String(), d.DigestStr(), nil
	}
	o := remoteOptions(ctx, opts)
	desc, err := remote.Head(r, o...)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		full, gerr := remote.Get(r, o...)
		if gerr != nil {
			return "", "", registryErr(gerr)
		}
		desc = &full.Descriptor
	}
	if desc.Digest.Algorithm != "sha256" {
		return "", "", invalidf("digest %s: only sha256 is read", desc.Digest)
	}
	return r.Context().Digest(desc.Digest.String()).String(), desc.Digest.String(), nil
}

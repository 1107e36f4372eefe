package ociimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReadRemote imports the image ref names ("registry/repo:tag" or
// "...@sha256:..."; docker's default registry when none is named) from
// its registry, anonymously. The server is the one reaching out, for a
// client: it refuses registries at loopback, private and link-local
// addresses unless opts.AllowPrivateRegistry, so a reference cannot make
// it call its own or its network's services.
func ReadRemote(ctx context.Context, ref string, opts Options, imp ImportFunc) (*Result, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: reference %q: %v", ErrInvalid, ref, err)
	}
	src := &remoteSource{ref: r, opts: remoteOptions(ctx, opts)}
	img, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	return run(ctx, img, opts, imp)
}

// remoteOptions are how this package talks to a registry: anonymously,
// through transport's address check.
func remoteOptions(ctx context.Context, opts Options) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(transport(opts.AllowPrivateRegistry)),
		remote.WithUserAgent("withruntime"),
	}
}

type remoteSource struct {
	ref  name.Reference
	opts []remote.Option
}

func registryErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRegistry) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrRegistry, err)
}

// get fetches the manifest or index ref names (checked against its digest
// when ref is one), bounded.
func (s *remoteSource) get(ref name.Reference) (*remote.Descriptor, error) {
	d, err := remote.Get(ref, s.opts...)
	if err != nil {
		return nil, registryErr(err)
	}
	if len(d.Manifest) > MaxManifest {
		return nil, invalidf("the manifest is %d bytes, more than %d", len(d.Manifest), MaxManifest)
	}
	return d, nil
}

func (s *remoteSource) resolve(ctx context.Context) (*resolved, error) {
	top, err := s.get(s.ref)
	if err != nil {
		return nil, err
	}
	desc := top
	if isIndex(top.MediaType) {
		d, err := pickImage(ctx, top.Manifest, func(d v1.Descriptor) ([]byte, error) {
			r, err := s.get(s.ref.Context().Digest(d.Digest.String()))
			if err != nil {
				return nil, err
			}
			return r.Manifest, nil
		})
		if err != nil {
			return nil, err
		}
		if desc, err = s.get(s.ref.Context().Digest(d.Digest.String())); err != nil {
			return nil, err
		}
	}
	if !isManifest(desc.MediaType) {
		return nil, invalidf("media type %q is not an image manifest", desc.MediaType)
	}
	m, err := parseManifest(desc.Manifest)
	if err != nil {
		return nil, err
	}
	if m.Config.Size > MaxConfig {
		return nil, invalidf("the config is %d bytes, more than %d", m.Config.Size, MaxConfig)
	}
	rc, err := s.blob(m.Config)
	if err != nil {
		return nil, err
	}
	cfg, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, registryErr(err)
	}
	img := &resolved{manifest: desc.Digest.String(), config: cfg}
	for _, l := range m.Layers {
		l := l
		img.layers = append(img.layers, layerSource{desc: l, open: func() (io.ReadCloser, error) { return s.blob(l) }})
	}
	return img, nil
}

// blob fetches the blob d names; the verifier checks its size and digest.
func (s *remoteSource) blob(d v1.Descriptor) (io.ReadCloser, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, invalidf("digest %s: only sha256 is read", d.Digest)
	}
	l, err := remote.Layer(s.ref.Context().Digest(d.Digest.String()), s.opts...)
	if err != nil {
		return nil, registryErr(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, registryErr(err)
	}
	return &verifier{rc: rc, want: d.Digest, size: d.Size, h: newHash()}, nil
}

// transport is an HTTP transport whose connections go only to public
// addresses unless private is true. The check is made on the address
// dialled, after name resolution, so a name resolving to a private address
// is refused too.
func transport(private bool) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !private {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: dialling %s: %v", ErrRegistry, address, err)
			}
			if !publicAddr(ap.Addr()) {
				return fmt.Errorf("%w: %s is not a public address; this server reaches only registries at public ones", ErrRegistry, ap.Addr())
			}
			return nil
		}
	}
	t.DialContext = d.DialContext
	t.Proxy = nil
	return t
}

// publicAddr reports whether a is an address on the internet: not
// loopback, private (RFC 1918, unique local, shared CGNAT), link-local,
// multicast or unspecified.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() {
		return false
	}
	return !netip.MustParsePrefix("100.64.0.0/10").Contains(a) && !netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

package ociimage

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPin: a tag is pinned to the digest its registry answers, and moves
// with the tag; the pinned reference reads that image; a digest reference
// is pinned as it is; loopback is refused without AllowPrivateRegistry.
func TestPin(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	layers := twoLayers(t)
	img := makeImage(t, "amd64", baseConfig, plainLayer(layers[0]), plainLayer(layers[1]))
	ref, err := name.ParseReference(host + "/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	ctx := context.Background()
	opts := Options{AllowPrivateRegistry: true}
	pinned, d, err := Pin(ctx, host+"/team/app:v1", opts)
	if err != nil || d != want.String() || pinned != host+"/team/app@"+want.String() {
		t.Fatalf("Pin = %q %q %v, want the digest %s", pinned, d, err, want)
	}
	rec := &recorder{}
	res, err := ReadRemote(ctx, pinned, opts, rec.imp)
	if err != nil {
		t.Fatal(err)
	}
	checkTwoLayers(t, res, rec, layers)

	// The tag moves: the pin follows it.
	other := makeImage(t, "amd64", baseConfig, plainLayer(layers[0]))
	if err := remote.Write(ref, other); err != nil {
		t.Fatal(err)
	}
	od, _ := other.Digest()
	if _, d2, err := Pin(ctx, host+"/team/app:v1", opts); err != nil || d2 != od.String() || d2 == d {
		t.Errorf("after the tag moved: %q %v, want %s", d2, err, od)
	}
	// A digest is pinned already: nothing is asked (an absent repository
	// would fail otherwise).
	byDigest := host + "/team/absent@" + want.String()
	if p, d3, err := Pin(ctx, byDigest, Options{}); err != nil || p != byDigest || d3 != want.String() {
		t.Errorf("Pin(%s) = %q %q %v", byDigest, p, d3, err)
	}
	if _, _, err := Pin(ctx, host+"/team/app:v1", Options{}); !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("loopback without AllowPrivateRegistry: %v", err)
	}
	if _, _, err := Pin(ctx, host+"/team/none:v1", opts); !errors.Is(err, ErrRegistry) {
		t.Errorf("an absent image: %v", err)
	}
}

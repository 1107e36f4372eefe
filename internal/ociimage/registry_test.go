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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestRegistry pulls from a registry the test serves on loopback: an index
// of two platforms gives the amd64 image; a plain image by digest too; the
// default options refuse the loopback address.
func TestRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	layers := twoLayers(t)
	amd := makeImage(t, "amd64", baseConfig, gzipLayer(t, layers[0]), plainLayer(layers[1]))
	arm := makeImage(t, "arm64", v1.Config{}, plainLayer(tarOf(t, file("arm", "no"))))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref, err := name.ParseReference(host + "/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	d, _ := amd.Digest()

	for _, r := range []string{host + "/team/app:v1", host + "/team/app@" + d.String()} {
		rec := &recorder{}
		res, err := ReadRemote(context.Background(), r, Options{AllowPrivateRegistry: true}, rec.imp)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		checkTwoLayers(t, res, rec, layers)
		if res.Manifest != d.String() {
			t.Errorf("%s: manifest %s, want %s", r, res.Manifest, d)
		}
	}

	rec := &recorder{}
	_, err = ReadRemote(context.Background(), host+"/team/app:v1", Options{}, rec.imp)
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("loopback without AllowPrivateRegistry: err = %v, want ErrRegistry", err)
	}
	_, err = ReadRemote(context.Background(), host+"/team/none:v1", Options{AllowPrivateRegistry: true}, rec.imp)
	if !errors.Is(err, ErrRegistry) {
		t.Errorf("an unknown repository: err = %v, want ErrRegistry", err)
	}
	if _, err := ReadRemote(context.Background(), "Not A Ref!", Options{}, rec.imp); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bad reference: err = %v, want ErrInvalid", err)
	}
}

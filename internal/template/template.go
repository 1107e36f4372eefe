package template

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// DefaultTag is the tag of a name given without one.
const DefaultTag = "latest"

// DefaultBase is the built-in image every sandbox started from before
// templates, and the base of the templates built on it.
const DefaultBase = "default"

// MaxLayers bounds a template's layers over its base: the read-only mount
// that stacks them names each in one page of mount options.
const MaxLayers = 32

// Sources: how a template was made.
const (
	SourceSnapshot = "snapshot"
	SourceOCI      = "oci"
	SourceBuild    = "build"
)

// States of a template.
const (
	StateReady    = "ready"
	StateDeleting = "deleting"
)

// Ref names a template: Name, and Tag (DefaultTag when absent).
type Ref struct{ Name, Tag string }

func (r Ref) String() string { return r.Name + ":" + r.Tag }

var (
	nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?(/[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?)?$`)
	tagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// ParseRef reads "name" or "name:tag". A name is one or two parts joined by
// "/" ("app", "myteam/app"), each 1 to 64 of a-z, 0-9, ".", "_", "-",
// starting and ending with a letter or digit; a tag is 1 to 128 of
// letters, digits, ".", "_", "-", not starting with "." or "-".
func ParseRef(s string) (Ref, error) {
	name, tag, hasTag := strings.Cut(s, ":")
	if !hasTag {
		tag = DefaultTag
	}
	if !nameRE.MatchString(name) {
		return Ref{}, fmt.Errorf("bad template name %q: one or two parts joined by \"/\", each 1 to 64 of a-z, 0-9, '.', '_', '-', starting and ending with a letter or digit", name)
	}
	if !tagRE.MatchString(tag) {
		return Ref{}, fmt.Errorf("bad template tag %q: 1 to 128 of letters, digits, '.', '_', '-', not starting with '.' or '-'", tag)
	}
	return Ref{Name: name, Tag: tag}, nil
}

// Defaults are what a sandbox of the template starts with unless its
// create says otherwise (api.Defaults, same JSON).
type Defaults struct {
	Env                 map[string]string `json:"env,omitempty"`
	Workdir             string            `json:"workdir,omitempty"`
	User                string            `json:"user,omitempty"`
	VCPUs               int               `json:"vcpus,omitempty"`
	MemoryMiB           int               `json:"memory_mib,omitempty"`
	StartCmd            string            `json:"start_cmd,omitempty"`
	ReadyCmd            string            `json:"ready_cmd,omitempty"`
	ReadyTimeoutSeconds int               `json:"ready_timeout_seconds,omitempty"`
}

// Template is the stored record of one template.
type Template struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Name    string `json:"name"`
	Tag     string `json:"tag"`
	Public  bool   `json:"public,omitempty"`
	Source  string `json:"source"`
	// Base is DefaultBase, or "" when the layers are a whole file system
	// of their own (an OCI image).
	Base string `json:"base,omitempty"`
	// BaseKey is the key of the built-in image's recipe (image.Recipe.Key)
	// the layers were made over, when Base is DefaultBase: an upgrade that
	// changes that image would stack them on files they were not made on,
	// so a server whose image has another key refuses to start from the
	// template (templates.Library.Resolve). Empty for templates made
	// before it was recorded, which start as before.
	BaseKey string `json:"base_key,omitempty"`
	// Layers are the digests ("sha256:" and hex) of the layers over the
	// base, lowest first.
	Layers    []string  `json:"layers"`
	SizeBytes int64     `json:"size_bytes"`
	Defaults  Defaults  `json:"defaults"`
	CreatedAt time.Time `json:"created_at"`
	// DeletedAt is set once the template was removed: its name is free,
	// and its layers go once nothing uses it.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Ref is the template's name and tag.
func (t *Template) Ref() Ref { return Ref{Name: t.Name, Tag: t.Tag} }

// State is StateReady, or StateDeleting once removed.
func (t *Template) State() string {
	if t.DeletedAt != nil {
		return StateDeleting
	}
	return StateReady
}

// NewID returns a fresh template id: "tpl_" and 16 hex digits.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return "tpl_" + hex.EncodeToString(b[:])
}

// ValidDigest reports whether d is "sha256:" and 64 lower-case hex digits,
// the only form of a layer's digest.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

package api

import "time"

// Preview URLs: HTTP to a port a sandbox listens on, through the server.
// The path form is /v1/sandboxes/{id}/ports/{port}/... on the API
// listener; the host form is {port}-{id}.{domain} on serve
// --preview-listen with --preview-domain.

// PreviewTokenHeader carries a preview token on a request to a preview.
const PreviewTokenHeader = "X-Withruntime-Preview-Token"

// PreviewTokenParam carries a preview token in a signed URL: the server
// answers with a redirect to the same URL without it, and a cookie.
const PreviewTokenParam = "withruntime_preview_token"

// Bounds of a preview token's life (GET .../previews/{port}?expires_in=).
const (
	MinPreviewExpiry     = 60 * time.Second
	MaxPreviewExpiry     = 7 * 24 * time.Hour
	DefaultPreviewExpiry = 24 * time.Hour
)

// Preview is how to reach one port of a sandbox
// (GET|PUT /v1/sandboxes/{id}/previews/{port}).
type Preview struct {
	Port   int  `json:"port"`
	Public bool `json:"public"`
	// Path is the path form, to join with the API's base URL.
	Path string `json:"path"`
	// Host and URL are the host form; empty when the server has no
	// preview domain.
	Host string `json:"host"`
	URL  string `json:"url"`
	// Token opens the port while it is private (empty when public): for
	// this sandbox and port only, until ExpiresAt or a revoke.
	Token     string     `json:"token,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// PreviewSettings is a sandbox's preview settings
// (GET /v1/sandboxes/{id}/previews, POST .../previews/revoke).
type PreviewSettings struct {
	PublicPorts []int `json:"public_ports"`
	// AllPublic serves every port with no key or token, as E2B's
	// sandboxes with public traffic are (PUT .../previews).
	AllPublic bool `json:"all_public"`
}

// SetPreviewsRequest is PUT /v1/sandboxes/{id}/previews's body.
type SetPreviewsRequest struct {
	AllPublic bool `json:"all_public"`
}

// SetPreviewRequest is PUT /v1/sandboxes/{id}/previews/{port}'s body.
type SetPreviewRequest struct {
	Public bool `json:"public"`
}

package e2bcompat

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// templates are the E2B template names withruntime takes, each the
// default image: the SDK's default, the code interpreter's, and none.
var templates = map[string]bool{"": true, "base": true, "code-interpreter-v1": true, "code-interpreter": true}

// newSandbox is E2B's NewSandbox (POST /v2/sandboxes).
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *e2bNetwork       `json:"network"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	// VolumeMounts are withruntime volumes, by name (an E2B volume id is
	// the volume's name).
	VolumeMounts []volumeMount `json:"volumeMounts"`
	// Refused when given: withruntime has nothing they could mean.
	MCP json.RawMessage `json:"mcp"`
	IAM json.RawMessage `json:"iam"`
}

// volumeMount is E2B's SandboxVolumeMount.
type volumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// given says whether a raw field was sent with a value.
func given(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// createRequest is withruntime's create for an E2B one.
func (n *newSandbox) createRequest(noInternet bool) (api.CreateSandboxRequest, error) {
	var req api.CreateSandboxRequest
	switch {
	case given(n.MCP):
		return req, unsupported("the MCP gateway (mcp)")
	case given(n.IAM):
		return req, unsupported("IAM tokens (iam)")
	case n.AutoPauseMemory != nil && !*n.AutoPauseMemory:
		return req, unsupported("a pause without memory (autoPauseMemory: false; withruntime's pause keeps memory and processes)")
	}
	switch {
	case isSnapshotID(n.TemplateID):
		// Sandbox.create(snapshotID): the snapshot gives the template,
		// the size and the processes.
		req.Snapshot = n.TemplateID
	case !templates[n.TemplateID]:
		// Any other name is a withruntime template of the key's account
		// (or a public one): an unknown one is the API's not_found.
		req.Template = n.TemplateID
	}
	req.TimeoutSeconds = defaultTimeout
	if n.Timeout != nil && *n.Timeout > 0 {
		req.TimeoutSeconds = *n.Timeout
	}
	if n.AutoPause != nil && *n.AutoPause {
		req.OnLeaseEnd = "pause"
	}
	// E2B's lifecycle {on_timeout: "pause", auto_resume: true}: a paused
	// sandbox wakes on the next call into it (envd's, a port's).
	req.AutoResume = n.AutoResume != nil && n.AutoResume.Enabled
	req.Metadata, req.Env = n.Metadata, n.EnvVars
	for _, m := range n.VolumeMounts {
		req.Volumes = append(req.Volumes, api.VolumeMount{Name: m.Name, Path: m.Path})
	}
	nw, err := networkOf(n.AllowInternetAccess, n.Network, noInternet)
	if err != nil {
		return req, err
	}
	req.Network = &nw
	return req, nil
}

// create is POST /v2/sandboxes (and /sandboxes).
func (s *Server) create(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	var n newSandbox
	if err := decodeBody(r, &n); err != nil {
		return err
	}
	req, err := n.createRequest(s.cfg.NoInternetByDefault)
	if err != nil {
		return err
	}
	sb, err := c.CreateSandbox(r.Context(), req)
	if errors.Is(err, client.ErrNotSupported) && n.AllowInternetAccess == nil && n.Network == nil {
		// E2B's default is Internet access; a server without egress
		// offers none, and an E2B client that asked for nothing in
		// particular gets a sandbox without it.
		req.Network = nil
		sb, err = c.CreateSandbox(r.Context(), req)
	}
	if err != nil {
		return err
	}
	if n.publicTraffic() {
		// E2B's sandbox URLs are public unless the create said otherwise;
		// a server without preview URLs has nothing to make public.
		if _, err := c.SetAllPortsPublic(r.Context(), sb.ID, true); err != nil && !errors.Is(err, client.ErrNotSupported) {
			return err
		}
	}
	writeJSON(w, http.StatusCreated, s.answerOf(sb, n.TemplateID, key))
	return nil
}

// publicTraffic says whether the sandbox's ports are served with no token
// (network.allowPublicTraffic, true unless given false).
func (n *newSandbox) publicTraffic() bool {
	return n.Network == nil || n.Network.AllowPublicTraffic == nil || *n.Network.AllowPublicTraffic
}

// connectRequest is the body of POST /v2/sandboxes/{id}/connect.
type connectRequest struct {
	Timeout *int  `json:"timeout"`
	Memory  *bool `json:"memory"`
}

// connect is POST /v2/sandboxes/{id}/connect: a running sandbox's lease
// lasts at least timeout more (200); a paused one resumes with a lease of
// timeout (201).
func (s *Server) connect(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	var cr connectRequest
	if err := decodeBody(r, &cr); err != nil {
		return err
	}
	if cr.Memory != nil && !*cr.Memory {
		return unsupported("resuming without memory (memory: false)")
	}
	timeout := defaultTimeout
	if cr.Timeout != nil && *cr.Timeout > 0 {
		timeout = *cr.Timeout
	}
	id := r.PathValue("id")
	sb, err := s.live(r, c, id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if sb.State == "paused" {
		if _, err := c.ResumeSandbox(r.Context(), id); err != nil {
			return err
		}
		sb, err = c.SetSandboxTimeout(r.Context(), id, timeout)
		status = http.StatusCreated
	} else {
		sb, err = c.ExtendSandbox(r.Context(), id, timeout)
	}
	if err != nil {
		return err
	}
	writeJSON(w, status, s.answerOf(sb, "", key))
	return nil
}

// live returns sandbox id unless it has ended: E2B has no ended sandbox,
// only one that is not found.
func (s *Server) live(r *http.Request, c *client.Client, id string) (*api.Sandbox, error) {
	sb, err := c.GetSandbox(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if sb.State == "ended" {
		return nil, &Error{Status: http.StatusNotFound, Message: "sandbox " + id + " not found: it has ended (" + sb.EndReason + ")"}
	}
	return sb, nil
}

// detail is GET /sandboxes/{id}.
func (s *Server) detail(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	sb, err := s.live(r, c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detailOf(sb, key, true))
	return nil
}

// kill is DELETE /sandboxes/{id}: 204, or 404 when it has already ended.
func (s *Server) kill(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	id := r.PathValue("id")
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	if _, err := c.StopSandbox(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// timeoutRequest is the body of POST /sandboxes/{id}/timeout.
type timeoutRequest struct {
	Timeout *int `json:"timeout"`
}

// setTimeout is POST /sandboxes/{id}/timeout: the lease ends timeout from
// now, sooner or later than it did. E2B's timeout 0 expires the sandbox
// now: what its lease's end does (a pause under on_timeout "pause", else
// the end) happens at once, as E2B's clients use it to force an
// auto-pause.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	var tr timeoutRequest
	if err := decodeBody(r, &tr); err != nil {
		return err
	}
	if tr.Timeout == nil || *tr.Timeout < 0 {
		return &Error{Status: http.StatusBadRequest, Message: "timeout must be a number of seconds, 0 or more"}
	}
	id := r.PathValue("id")
	sb, err := s.live(r, c, id)
	if err != nil {
		return err
	}
	switch {
	case *tr.Timeout > 0:
		_, err = c.SetSandboxTimeout(r.Context(), id, *tr.Timeout)
	case sb.State == "paused":
		// Expired already: its lease's end has happened.
	case sb.OnLeaseEnd == "pause":
		_, err = c.PauseSandbox(r.Context(), id)
	default:
		_, err = c.StopSandbox(r.Context(), id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refresh is the old POST /sandboxes/{id}/refreshes: the lease lasts at
// least duration more (default E2B's).
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	var rr struct {
		Duration *int `json:"duration"`
	}
	if err := decodeBody(r, &rr); err != nil {
		return err
	}
	d := defaultTimeout
	if rr.Duration != nil && *rr.Duration > 0 {
		d = *rr.Duration
	}
	id := r.PathValue("id")
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	if _, err := c.ExtendSandbox(r.Context(), id, d); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pause is POST /sandboxes/{id}/pause: 204, 409 when already paused.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	var pr struct {
		Memory *bool `json:"memory"`
	}
	if err := decodeBody(r, &pr); err != nil {
		return err
	}
	if pr.Memory != nil && !*pr.Memory {
		return unsupported("a pause without memory (memory: false; withruntime's pause keeps memory and processes)")
	}
	id := r.PathValue("id")
	sb, err := s.live(r, c, id)
	if err != nil {
		return err
	}
	if sb.State == "paused" {
		return &Error{Status: http.StatusConflict, Message: "sandbox " + id + " is already paused"}
	}
	if _, err := c.PauseSandbox(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// updateNetwork is PUT /sandboxes/{id}/network: the policy the body
// describes replaces the sandbox's.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	var body struct {
		e2bNetwork
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	nw, err := networkOf(body.AllowInternetAccess, &body.e2bNetwork, s.cfg.NoInternetByDefault)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	if _, err := c.SetNetwork(r.Context(), id, nw); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

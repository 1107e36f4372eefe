package httpapi

import (
	"slices"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// createRequest is the one conversion of the API's create request into
// the domain's (service.CreateRequest), for every front door that creates
// sandboxes (the E2B layer and MCP create through this API). What belongs
// to the wire was checked as the body was decoded (strictly: unknown
// fields, trailing data, oversize bodies); the values are checked by the
// manager that runs the sandbox (specFor), against its settings, and a
// many-host control plane places by this form (cluster.Control.Create).
// Template and its older name image become the one field Image; the two
// given and different is a bad request.
func createRequest(req api.CreateSandboxRequest) (service.CreateRequest, error) {
	image := req.Image
	if req.Template != "" {
		if image != "" && image != req.Template {
			return service.CreateRequest{}, sandbox.Errorf(sandbox.KindInvalid, "template %q and image %q disagree: image is the older name of template, give one", req.Template, req.Image)
		}
		image = req.Template
	}
	out := service.CreateRequest{
		Isolation:      req.Isolation,
		Image:          image,
		VCPUs:          req.VCPUs,
		MemoryMiB:      req.MemoryMiB,
		DiskGiB:        req.DiskGiB,
		TimeoutSeconds: req.TimeoutSeconds,
		OnLeaseEnd:     sandbox.LeaseEndAction(req.OnLeaseEnd),
		AutoResume:     req.AutoResume,
		Env:            req.Env,
		Metadata:       req.Metadata,
		MaxCostMicros:  req.MaxCostMicros,
		Snapshot:       req.Snapshot,
	}
	if req.Network != nil {
		out.Network = networkOf(*req.Network)
	}
	return out, nil
}

// networkOf is an egress policy as the domain takes it; the manager checks
// it against the server's settings.
func networkOf(n api.Network) sandbox.Network {
	return sandbox.Network{Internet: n.Internet, Allow: slices.Clone(n.Allow)}
}

// egressView is an egress log as the API shows it.
func egressView(events []egress.Event) []api.EgressEvent {
	out := make([]api.EgressEvent, 0, len(events))
	for _, ev := range events {
		out = append(out, api.EgressEvent{Time: ev.Time, Kind: ev.Kind, Name: ev.Name, Address: ev.Address, Port: ev.Port, Verdict: ev.Verdict, Reason: ev.Reason})
	}
	return out
}

package httpapi

import (
	"slices"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// Bounds of a create's environment and metadata: the shape of the
// request, which no server setting changes.
const (
	maxMetadata      = 64
	maxMetadataKey   = 128
	maxMetadataValue = 1024
	maxEnv           = 256
	maxEnvValue      = 32 << 10
)

// createRequest is the one conversion of the API's create request into
// the domain's (service.CreateRequest), for every front door that creates
// sandboxes (the e2b layer creates through this API). It checks what
// belongs to the wire and needs no server setting: the environment's
// names and values and the metadata's entries. The rest (sizes, timeout,
// isolation, network, cost) is checked where the server's settings are,
// by the manager that runs the sandbox.
func createRequest(req api.CreateSandboxRequest) (service.CreateRequest, error) {
	out := service.CreateRequest{
		Isolation:      req.Isolation,
		Image:          req.Image,
		VCPUs:          req.VCPUs,
		MemoryMiB:      req.MemoryMiB,
		DiskGiB:        req.DiskGiB,
		TimeoutSeconds: req.TimeoutSeconds,
		OnLeaseEnd:     sandbox.LeaseEndAction(req.OnLeaseEnd),
		Env:            req.Env,
		Metadata:       req.Metadata,
		MaxCostMicros:  req.MaxCostMicros,
	}
	if req.Network != nil {
		out.Network = networkOf(*req.Network)
	}
	if len(req.Env) > maxEnv {
		return out, sandbox.Errorf(sandbox.KindInvalid, "at most %d environment variables", maxEnv)
	}
	for k, v := range req.Env {
		if !api.EnvName(k) || strings.ContainsRune(v, 0) || len(v) > maxEnvValue {
			return out, sandbox.Errorf(sandbox.KindInvalid, "bad environment variable %q: names are letters, digits and _, not starting with a digit; values at most %d bytes without NUL", k, maxEnvValue)
		}
	}
	if len(req.Metadata) > maxMetadata {
		return out, sandbox.Errorf(sandbox.KindInvalid, "at most %d metadata entries", maxMetadata)
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue || strings.ContainsRune(k+v, 0) {
			return out, sandbox.Errorf(sandbox.KindInvalid, "bad metadata entry %q: keys 1-%d bytes, values at most %d bytes, no NUL", k, maxMetadataKey, maxMetadataValue)
		}
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

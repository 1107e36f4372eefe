package noderpc

import (
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// Paths of the node's RPC. {id} is a sandbox id; every body is JSON.
// Errors are api.ErrorBody with the status the API gives the code
// (ErrorAnswer), so an API server passes a node's refusal on as it is.
const (
	// PathHealth (GET) answers Health.
	PathHealth = "/node/v1/health"
	// PathCreate (POST CreateRequest) answers 201 with a sandbox.Record.
	PathCreate = "/node/v1/sandboxes"
	// PathOp (POST OpRequest) runs one of the Op* operations on a sandbox
	// and answers 200 with its sandbox.Record.
	PathOp = "/node/v1/sandboxes/{id}/{op}"
	// PathNetwork (PUT NetworkRequest) replaces the egress policy and
	// answers 200 with the sandbox.Record.
	PathNetwork = "/node/v1/sandboxes/{id}/network"
	// PathEgress (GET, ?account=) answers 200 with []egress.Event (the
	// JSON of api.EgressEvent).
	PathEgress = "/node/v1/sandboxes/{id}/egress"
	// PathAgent is the prefix of requests for a sandbox's agent: any
	// method, /node/v1/sandboxes/{id}/agent/PATH?QUERY reaches the agent's
	// /PATH?QUERY, streamed both ways, for the account in HeaderAccount.
	PathAgent = "/node/v1/sandboxes/{id}/agent/"
	// PathSnapshot (POST SnapshotRequest) snapshots a running sandbox and
	// answers 201 with its sandbox.Snapshot.
	PathSnapshot = "/node/v1/sandboxes/{id}/snapshots"
	// PathFork (POST ForkRequest) forks a running sandbox on the node and
	// answers 200 with a ForkResult.
	PathFork = "/node/v1/sandboxes/{id}/fork"
	// PathDeleteSnapshot (DELETE, ?account=) removes a snapshot of the
	// node's disk, files and record, and answers 204.
	PathDeleteSnapshot = "/node/v1/snapshots/{id}"
	// PathVolumes (POST VolumeCreateRequest) makes a volume on the node
	// and answers 201 with its api.Volume.
	PathVolumes = "/node/v1/volumes"
	// PathVolume (GET, DELETE; ?account=) is one volume of the node: its
	// api.Volume, or 204 once removed.
	PathVolume = "/node/v1/volumes/{name}"
	// PathVolumeFiles (GET, PUT, DELETE; ?account=&path=) is the public
	// API's /v1/volumes/{name}/files on the node: a GET of a directory
	// answers api.VolumeFileList with HeaderVolumeDir set, of a file its
	// bytes; PUT streams the body in; both others answer 204.
	PathVolumeFiles = "/node/v1/volumes/{name}/files"
	// PathVolumeArchive (GET, PUT; ?account=&path=) streams a tar out of
	// or into the volume, as the public API's /archive.
	PathVolumeArchive = "/node/v1/volumes/{name}/archive"
)

// HeaderVolumeDir marks a PathVolumeFiles answer that lists a directory.
const HeaderVolumeDir = "X-Withruntime-Volume-Dir"

// Operations of PathOp.
const (
	OpStop     = "stop"
	OpPause    = "pause"
	OpResume   = "resume"
	OpExtend   = "extend"
	OpSetLease = "set_lease"
)

// HeaderAccount names the account an agent request acts for ("" for none:
// the admin's view of every account).
const HeaderAccount = "X-Withruntime-Account"

// CreateRequest asks a node to create a sandbox. Request is the create as
// the API edge converted it; its JSON is the API's request's.
type CreateRequest struct {
	Account string                `json:"account"`
	KeyID   string                `json:"key_id"`
	Request service.CreateRequest `json:"request"`
}

// OpRequest asks for an operation on one sandbox of Account.
type OpRequest struct {
	Account string `json:"account"`
	// TimeoutMs is the lease asked for by extend and set_lease.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// Reason, on a stop, is the end reason the stop records instead of
	// stopped. A node accepts only sandbox.EndRetentionEnded, and only
	// for a paused sandbox whose retention is over: the failure detector
	// sends it to remove a lost node's shared checkpoint when its
	// retention ends, as that node's reaper would have. Anything else is
	// refused (invalid).
	Reason sandbox.EndReason `json:"reason,omitempty"`
}

// SnapshotRequest asks for a snapshot of one sandbox of Account.
type SnapshotRequest struct {
	Account string `json:"account"`
	Name    string `json:"name,omitempty"`
}

// ForkRequest asks for Count sandboxes forked from one of Account's, for
// the key KeyID; Keep keeps their snapshot afterwards.
type ForkRequest struct {
	Account string `json:"account"`
	KeyID   string `json:"key_id"`
	Count   int    `json:"count"`
	Keep    bool   `json:"keep,omitempty"`
}

// ForkResult is a fork's answer: the forks, and the snapshot when kept.
type ForkResult struct {
	Snapshot  *sandbox.Snapshot `json:"snapshot,omitempty"`
	Sandboxes []*sandbox.Record `json:"sandboxes"`
}

// VolumeCreateRequest asks a node for a volume of Account.
type VolumeCreateRequest struct {
	Account string `json:"account"`
	Name    string `json:"name"`
	SizeGiB int    `json:"size_gib"`
}

// NetworkRequest replaces a sandbox's egress policy.
type NetworkRequest struct {
	Account string          `json:"account"`
	Network sandbox.Network `json:"network"`
}

// Health is what a node says of itself.
type Health struct {
	Node  string `json:"node"`
	Epoch int64  `json:"epoch"`
	// Fenced is true while the node cannot renew its lease: it serves no
	// sandbox then.
	Fenced bool `json:"fenced"`
}

// ErrorAnswer is the status and body a node answers err with: the API's
// error envelope, with what a client may read of err (service.Public) and
// the status the API gives its code (service.Status).
func ErrorAnswer(err error) (int, api.ErrorBody) {
	k, msg := service.Public(err)
	return service.Status(k), api.ErrorBody{Error: api.ErrorDetail{Code: string(k), Message: msg}}
}

package store

import (
	"context"
	"time"
)

// Nodes is the registry of nodes: the hosts of a many-host installation
// that run sandboxes. Each node renews a lease on its entry; times of
// leases are the store's own clock, so that no two hosts' clocks need to
// agree.
type Nodes interface {
	// RegisterNode inserts or replaces the node's entry with a new epoch
	// (one more than the last one of its ID, 1 for a new ID), Lost false,
	// and a lease of ttl from now. It fills n's Epoch, RegisteredAt,
	// RenewedAt and LeaseEndsAt.
	RegisterNode(ctx context.Context, n *Node, ttl time.Duration) error
	// RenewNode moves the lease of node id to end ttl from now and records
	// its load, if its entry still has that epoch and is not lost; else
	// the error is ErrStale and the node must stop serving and register
	// again.
	RenewNode(ctx context.Context, id string, epoch int64, load NodeLoad, ttl time.Duration) (*Node, error)
	// GetNode returns one node's entry.
	GetNode(ctx context.Context, id string) (*Node, error)
	// ListNodes returns every node's entry, by ID, with Expired set from
	// the store's clock.
	ListNodes(ctx context.Context) ([]Node, error)
	// MarkNodeLost sets Lost on the node's entry if it still has that epoch
	// and its lease has run out by the store's clock, and reports whether
	// it did: of many detectors, one wins.
	MarkNodeLost(ctx context.Context, id string, epoch int64) (bool, error)
	// SetNodeCert sets the Cert of node id's entry if it still has that
	// epoch, is not lost and asks for csr (its CSR); else ErrStale. An
	// API server writes there what it issued for the entry's CSR.
	SetNodeCert(ctx context.Context, id string, epoch int64, csr, cert string) error
}

// Node is one node's entry in the registry.
type Node struct {
	ID string `json:"id"`
	// Addr is where API servers reach the node (host:port, over mutual
	// TLS).
	Addr string `json:"addr"`
	// Epoch counts the node's registrations: a node that comes back after
	// it was declared lost is a new epoch, and what it held before is not
	// its any more.
	Epoch int64 `json:"epoch"`
	// Capacity is what admission on the node may hand out (before its
	// overcommit ratio).
	CPUs       int     `json:"cpus"`
	MemoryMiB  int     `json:"memory_mib"`
	DiskMiB    int64   `json:"disk_mib"`
	Overcommit float64 `json:"overcommit"`
	// Compat is what a checkpoint saved on this node needs to be restored
	// elsewhere: the runsc build and the CPU features, as one string that
	// must be equal.
	Compat string `json:"compat"`
	// SharedCheckpoints is true when the node keeps paused sandboxes'
	// checkpoints in the shared checkpoint storage.
	SharedCheckpoints bool `json:"shared_checkpoints,omitempty"`
	// Isolations are the isolations the node runs (sandbox.Isolations),
	// its default first. Empty is a node from before isolations, which
	// runs gVisor only.
	Isolations []string `json:"isolations,omitempty"`
	// CSR is the node's certificate request (PEM), made with a key that
	// never leaves the node's process; an API server issues a certificate
	// for it naming this entry's ID and nothing else (clusterpki).
	CSR string `json:"csr,omitempty"`
	// Cert is the certificate chain (PEM) an API server issued for CSR
	// (SetNodeCert); a registration, which carries a new CSR, clears it.
	Cert string `json:"cert,omitempty"`
	// Load is what the node reported at its last renewal.
	Load NodeLoad `json:"load"`

	RegisteredAt time.Time `json:"registered_at"`
	RenewedAt    time.Time `json:"renewed_at"`
	LeaseEndsAt  time.Time `json:"lease_ends_at"`
	// Lost is set once a failure detector gave up on this epoch.
	Lost bool `json:"lost,omitempty"`
	// Expired is computed on reading: the lease has ended by the store's
	// clock.
	Expired bool `json:"-"`
}

// NodeLoad is what a node holds at the moment of a renewal.
type NodeLoad struct {
	Sandboxes int `json:"sandboxes"`
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memory_mib"`
	DiskMiB   int `json:"disk_mib"`
}

package api

// ReseedRequest is what the host sends the agent of a sandbox started
// from a snapshot (POST /reseed), before anyone else reaches it: fresh
// randomness of the host's for the sandbox's kernel.
type ReseedRequest struct {
	// Entropy is mixed into the kernel's pool and credited, and the
	// kernel's generator reseeded from it, where the kernel lets the
	// agent do so (a microVM's Linux; gVisor's generator is the host's).
	Entropy []byte `json:"entropy"`
	// Net, when set, is the sandbox's own network, which a restored
	// machine's kernel does not take by itself (a microVM's Linux): eth0
	// takes Addr/Prefix, the default route goes through Gw, and
	// /etc/resolv.conf becomes Resolver.
	Net *ReseedNet `json:"net,omitempty"`
}

// ReseedNet is a restored microVM's own side of its link.
type ReseedNet struct {
	Addr     string `json:"addr"`
	Prefix   int    `json:"prefix"`
	Gw       string `json:"gw"`
	Resolver string `json:"resolver"`
}

// ReseedAnswer says what the agent renewed.
type ReseedAnswer struct {
	// BootID is the sandbox's boot id now.
	BootID string `json:"boot_id"`
	// KernelReseeded is true when the kernel took Entropy and reseeded.
	KernelReseeded bool `json:"kernel_reseeded"`
}

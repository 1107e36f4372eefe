package api

// ReseedRequest is what the host sends the agent of a sandbox started
// from a snapshot (POST /reseed), before anyone else reaches it: fresh
// randomness of the host's for the sandbox's kernel.
type ReseedRequest struct {
	// Entropy is mixed into the kernel's pool and credited, and the
	// kernel's generator reseeded from it, where the kernel lets the
	// agent do so (a microVM's Linux; gVisor's generator is the host's).
	Entropy []byte `json:"entropy"`
}

// ReseedAnswer says what the agent renewed.
type ReseedAnswer struct {
	// BootID is the sandbox's boot id now.
	BootID string `json:"boot_id"`
	// KernelReseeded is true when the kernel took Entropy and reseeded.
	KernelReseeded bool `json:"kernel_reseeded"`
}

// Package guest is the contract between the microVM backend and the
// guest's init (cmd/microvm-init): the JSON on the config disk, the serials
// the disks are found by, the name of the agent's port and the probe's
// words. Both sides import it, so that neither can drift from the other;
// it imports nothing, since init is a small static binary.
package guest

// Config is the JSON on the disk with serial SerialConfig, NUL-padded to
// the disk's size.
type Config struct {
	Env       []string `json:"env"`
	MemoryMiB int      `json:"memory_mib"`
	Hostname  string   `json:"hostname"`
	Net       *Net     `json:"net,omitempty"`
	// Files are written into the guest's root before the agent starts
	// (its resolver, the installation's CA).
	Files map[string]string `json:"files,omitempty"`
	// Volumes are the virtiofs shares init mounts before the agent
	// starts; the host serves each tag with its own virtiofsd.
	Volumes []Volume `json:"volumes,omitempty"`
}

// Volume is one virtiofs share: the device's tag and where it goes in
// the guest's root. ReadOnly is the guest's own flag; the host serves a
// read-only share from a read-only mount, which the guest cannot undo.
type Volume struct {
	Tag      string `json:"tag"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// VolumeModules names the file in the initramfs that lists, in order,
// the modules a guest with volumes loads (FUSE and virtiofs): a guest
// without volumes never loads them.
const VolumeModules = "/modules/volumes"

// Net is the guest's side of its link: eth0's address and the gateway
// (the sandbox's host end).
type Net struct {
	Addr   string `json:"addr"`
	Prefix int    `json:"prefix"`
	Gw     string `json:"gw"`
}

// The disks' serials: virtio's order is not the command line's, so init
// finds each disk by its serial.
const (
	SerialBase   = "wr-base"   // the image, read-only
	SerialDisk   = "wr-disk"   // the sandbox's own disk
	SerialConfig = "wr-config" // Config
)

// PortName is the virtio-serial port that carries the host-agent link.
const PortName = "withruntime.agent"

// With ProbeArg on the kernel command line init prints ProbeOK and powers
// off: the host's check that a guest boots with an accelerator.
const (
	ProbeArg = "withruntime.probe"
	ProbeOK  = "withruntime-probe-ok"
)

// Package microvm is the microVM backend: each sandbox is a QEMU `microvm`
// machine with its own Linux kernel (Debian's cloud kernel, fetched by
// `withruntime setup`), booted from an initramfs this project builds
// (cmd/microvm-init loads the virtio modules, mounts the shared image
// read-only under the sandbox's own disk, and starts the agent as PID 1).
// The agent speaks the same host↔agent contract as under gVisor, over one
// virtio-serial port multiplexed by agentlink.ServePort.
//
// QEMU runs jailed: an unprivileged user of its own, chrooted into a
// directory that holds only QEMU's files and the kernel (read-only) and a
// writable directory for its sockets, in new mount, IPC and UTS
// namespaces, under `-sandbox on` (seccomp), `-nodefaults` and a cgroup
// with the sandbox's limits. Its disks are descriptors the host opened.
//
// It registers itself as "microvm". Under `--microvm-accel tcg` it runs
// with software emulation (slow: seconds to boot), which is how it is
// tested on hosts whose KVM boots no stock kernel.
package microvm

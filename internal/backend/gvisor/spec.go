package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Inside the sandbox.
const (
	agentMountDir = "/opt/withruntime"
	sockMountDir  = "/run/withruntime"
	agentBinary   = agentMountDir + "/sandbox-agent"
)

// caps are the capabilities of the sandbox's root. They are gVisor's to
// contain: none of them reaches the host. sudo needs SETUID and SETGID.
var caps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_MKNOD", "CAP_AUDIT_WRITE",
	"CAP_SETFCAP", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_NET_ADMIN",
}

const cpuPeriod = 100000

var nextCPU atomic.Uint64

// cpuset spreads sandboxes smaller than the host over its CPUs, so that a
// 1 vCPU sandbox sees one CPU and uses at most one. Empty means all.
func cpuset(vcpus int) string {
	n := runtime.NumCPU()
	if vcpus >= n {
		return ""
	}
	start := int(nextCPU.Add(uint64(vcpus))) % n
	cpus := make([]int, 0, vcpus)
	for i := 0; i < vcpus; i++ {
		cpus = append(cpus, (start+i)%n)
	}
	sort.Ints(cpus)
	s := ""
	for i, c := range cpus {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(c)
	}
	return s
}

// volumeMounts binds each volume's mounted file system (internal/volume)
// at its path. The gofer serves it with shared file access
// (--file-access-mounts=shared), so sandboxes mounting one volume see
// each other's writes; the host never follows what is in it.
func volumeMounts(spec sandbox.Spec) []specs.Mount {
	var out []specs.Mount
	for _, v := range spec.Volumes {
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{Destination: v.Path, Type: "bind", Source: v.HostDir, Options: []string{"rbind", mode, "nosuid", "nodev"}})
	}
	return out
}

func tmpfsSize(spec sandbox.Spec) string {
	return fmt.Sprintf("size=%dm", spec.MemoryMiB/2)
}

func (b *Backend) writeSpec(id string, p paths, rootfs string, spec sandbox.Spec, warm bool) error {
	var trust []string
	if b.plumb != nil && b.cfg.Egress.CABundle != "" {
		trust = sandbox.CAEnv
	}
	env := append(sandbox.Env(spec.Env, trust), agentlink.DefaultsEnv(spec.Workdir, spec.User)...)
	mem := int64(spec.MemoryMiB) << 20
	quota := int64(spec.VCPUs) * cpuPeriod
	period := uint64(cpuPeriod)
	pids := int64(spec.PidsLimit)
	cpu := &specs.LinuxCPU{Quota: &quota, Period: &period, Cpus: cpuset(spec.VCPUs)}
	if warm {
		// Any other start leaves shares unset: the new cgroup's default.
		shares := uint64(hostcgroup.WarmShares)
		cpu.Shares = &shares
	}
	s := specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: []string{agentBinary},
			Env:  env,
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20}},
		},
		Root:     &specs.Root{Path: rootfs, Readonly: false},
		Hostname: "sandbox",
		Mounts: append([]specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			// As on Debian 13: /tmp and /dev/shm are memory file systems of
			// half the sandbox's memory each, writable by everyone. Their
			// pages count against the sandbox's memory limit.
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", tmpfsSize(spec)}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "nodev", "noexec", "mode=1777", tmpfsSize(spec)}},
			{Destination: agentMountDir, Type: "bind", Source: b.agentDir, Options: []string{"rbind", "ro"}},
			// Read-only: the host's listener and the resume flag are the
			// host's alone; the agent connects out (--host-uds=open).
			{Destination: sockMountDir, Type: "bind", Source: p.sock, Options: []string{"rbind", "ro"}},
		}, append(b.egressMounts(p), volumeMounts(spec)...)...),
		Linux: &specs.Linux{
			CgroupsPath: cgroupPath(id),
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &mem},
				CPU:    cpu,
				Pids:   &specs.LinuxPids{Limit: pids},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace, Path: p.netns},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
			},
		},
	}
	data, err := json.Marshal(&s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.bundle, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.bundle, "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("writing OCI spec: %w", err)
	}
	return nil
}

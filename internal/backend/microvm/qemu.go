package microvm

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/agentlink"
	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Inside the jail (its root is the read-only tree, run/ the sandbox's
// writable directory).
const (
	jailKernel  = "/boot/vmlinuz"
	jailInitrd  = "/boot/initrd.img"
	jailAgent   = "/run/agent.sock"
	jailConsole = "/run/console.sock"
	jailQMP     = "/run/qmp.sock"
)

// configSize is the config disk's size (a CA bundle fits).
const configSize = 1 << 20

func (b *Backend) writeConfig(path string, spec sandbox.Spec, link *network.Link) error {
	var trust []string
	cfg := guest.Config{MemoryMiB: spec.MemoryMiB, Hostname: "sandbox", Volumes: guestVolumes(spec)}
	if link != nil {
		cfg.Net = &guest.Net{Addr: link.SandboxAddr.String(), Prefix: link.Prefix.Bits(), Gw: link.HostAddr.String()}
		files, caEnv, err := b.guestTrust(link)
		if err != nil {
			return err
		}
		cfg.Files = files
		trust = caEnv
	}
	cfg.Env = append(sandbox.Env(spec.Env, trust), agentlink.DefaultsEnv(spec.Workdir, spec.User)...)
	if _, set := spec.Env["HOME"]; !set {
		// runsc gives a root process HOME=/root unless it is set; the
		// guest's init does not, so the agent is given it here.
		cfg.Env = append(cfg.Env, "HOME=/root")
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if len(data) > configSize {
		return sandbox.Errorf(sandbox.KindInvalid, "the environment is over %d KiB", configSize>>10)
	}
	return os.WriteFile(path, append(data, make([]byte, configSize-len(data))...), 0o600)
}

// kernelArgs is the guest's command line. panic=-1 and -no-reboot make a
// panic end QEMU. reboot=t restarts by a triple fault, which QEMU always
// takes as a reset: the kernel's default order (ACPI, then a keyboard
// controller microvm lacks, then a jump to firmware) hung one panic in
// three under TCG. Under TCG the TSC options spare a calibration that
// hangs now and then without a PIT reference.
func (b *Backend) kernelArgs() string {
	args := "console=ttyS0 panic=-1 reboot=t quiet"
	if b.cfg.Accel == "tcg" {
		args += " tsc_early_khz=2000000 tsc=reliable no_timer_check"
	}
	return args
}

// qemuArgs is QEMU's command line; the disks are descriptors 3 (base,
// read-only), 4 and 6 (the sandbox's disk, read-write and read-only:
// QEMU asks an fd set for either) and 5 (config, read-only). The disk
// has no image locks: QEMU takes them per descriptor, so a machine that
// goes on after a migration (a snapshot) cannot take back its write lock
// while the read-only descriptor of the same file holds its own; the host
// gives each disk file to one QEMU only.
func (b *Backend) qemuArgs(id string, spec sandbox.Spec, incoming, nic bool) []string {
	cpu := "max"
	if b.cfg.Accel == "kvm" {
		cpu = "host"
	}
	machine := "microvm,rtc=on,pit=on,pic=on,isa-serial=on"
	if len(spec.Volumes) > 0 {
		machine += ",memory-backend=mem"
	}
	a := []string{
		qemuBinary, "-name", "wr-" + id,
		"-M", machine,
		"-accel", b.accel(), "-smp", strconv.Itoa(spec.VCPUs), "-m", strconv.Itoa(spec.MemoryMiB),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-S",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", jailKernel, "-initrd", jailInitrd, "-append", b.kernelArgs(),
		"-chardev", "socket,id=con,path=" + jailConsole + ",server=on,wait=off", "-serial", "chardev:con",
		"-add-fd", "fd=3,set=1", "-add-fd", "fd=4,set=2", "-add-fd", "fd=6,set=2", "-add-fd", "fd=5,set=3",
		"-drive", "id=base,file=/dev/fdset/1,format=raw,if=none,readonly=on",
		"-device", "virtio-blk-device,drive=base,serial=" + guest.SerialBase,
		"-drive", "id=disk,file=/dev/fdset/2,file.locking=off,format=raw,if=none,discard=unmap",
		"-device", "virtio-blk-device,drive=disk,serial=" + guest.SerialDisk,
		"-drive", "id=cfg,file=/dev/fdset/3,format=raw,if=none,readonly=on",
		"-device", "virtio-blk-device,drive=cfg,serial=" + guest.SerialConfig,
		"-device", "virtio-serial-device",
		"-chardev", "socket,id=agent,path=" + jailAgent + ",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=" + guest.PortName,
		"-qmp", "unix:" + jailQMP + ",server=on,wait=off",
	}
	if cpu == "max" {
		// TCG's default CPU: "max" turns on features TCG emulates slowly.
		cpu = ""
	}
	if cpu != "" {
		a = append(a, "-cpu", cpu)
	}
	if nic {
		// The tap is descriptor 7, with virtio-net headers.
		a = append(a, "-netdev", "tap,id=net,fd=7,vhost=off", "-device", "virtio-net-device,netdev=net")
	}
	a = append(a, volumeArgs(spec)...)
	if incoming {
		a = append(a, "-incoming", "defer")
	}
	return a
}

// accel is QEMU's -accel; TCG's translation cache is capped (its default
// is 1 GiB per machine).
func (b *Backend) accel() string {
	if b.cfg.Accel == "tcg" {
		return "tcg,tb-size=64"
	}
	return b.cfg.Accel
}

// prepareJail mounts the read-only tree at jail/ and the sandbox's own
// directory at jail/run, owned by its QEMU's user.
func (b *Backend) prepareJail(p paths, uid int) error {
	for _, d := range []string{p.jail, p.vm} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.Chown(p.vm, uid, uid); err != nil {
		return err
	}
	if !mounted(p.jail) {
		if err := unix.Mount(b.root, p.jail, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("jail: %w", err)
		}
		if err := unix.Mount("", p.jail, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			unix.Unmount(p.jail, unix.MNT_DETACH)
			return fmt.Errorf("jail read-only: %w", err)
		}
	}
	run := filepath.Join(p.jail, "run")
	if !mounted(run) {
		if err := unix.Mount(p.vm, run, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("jail run: %w", err)
		}
		if err := unix.Mount("", run, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("jail run: %w", err)
		}
	}
	devs := []string{"null"}
	if b.cfg.Accel == "kvm" {
		devs = append(devs, "kvm")
	}
	for _, d := range devs {
		dst := filepath.Join(p.jail, "dev", d)
		if !mounted(dst) {
			if err := unix.Mount("/dev/"+d, dst, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("jail /dev/%s: %w", d, err)
			}
		}
	}
	return nil
}

// releaseJail unmounts what prepareJail mounted.
func releaseJail(p paths) {
	for _, m := range []string{filepath.Join(p.jail, "dev", "kvm"), filepath.Join(p.jail, "dev", "null"), filepath.Join(p.jail, "run"), p.jail} {
		for mounted(m) {
			if unix.Unmount(m, unix.MNT_DETACH) != nil {
				break
			}
		}
	}
}

// mounted reports whether path is a mount point (its device differs from
// its parent's, or it is a bind of a file).
func mounted(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && unescapeMount(f[4]) == path {
			return true
		}
	}
	return false
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// launch starts QEMU jailed and stopped (-S), on the read-only disk base:
// the caller puts it in its cgroup before it runs a guest instruction.
// QEMU's own output goes to out, which must be bounded (a ring): QEMU is
// untrusted, and a file it could write would have no limit.
func (b *Backend) launch(id string, p paths, base string, spec sandbox.Spec, incoming bool, tap *os.File, out io.Writer) (*exec.Cmd, error) {
	launchMu.Lock()
	defer launchMu.Unlock()
	used, err := uidsInUse()
	if err != nil {
		return nil, err
	}
	uid, err := pickUID(id, func(u int) bool { return used[u] })
	if err != nil {
		return nil, err
	}
	if err := writeUID(p, uid); err != nil {
		return nil, err
	}
	if err := b.prepareJail(p, uid); err != nil {
		return nil, err
	}
	if err := b.startVolumes(id, p, spec, uid, out); err != nil {
		return nil, err
	}
	baseF, err := os.OpenFile(base, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer baseF.Close()
	diskF, err := os.OpenFile(p.disk, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer diskF.Close()
	cfgF, err := os.OpenFile(p.config, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer cfgF.Close()
	args := b.qemuArgs(id, spec, incoming, tap != nil)
	cmd := &exec.Cmd{Path: qemuBinary, Args: args, Dir: "/", Env: []string{}}
	diskRO, err := os.OpenFile(p.disk, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer diskRO.Close()
	cmd.ExtraFiles = []*os.File{baseF, diskF, cfgF, diskRO}
	if tap != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, tap)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     p.jail,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}},
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
		Setsid:     true,
	}
	// A pipe (exec copies it into out): after a restart its reader is
	// gone and QEMU, which ignores SIGPIPE, loses only these lines.
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	if err := os.WriteFile(p.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

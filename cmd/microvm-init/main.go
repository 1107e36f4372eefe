// Command microvm-init is PID 1 of a microVM's initramfs. It loads the
// virtio modules the guest kernel needs (listed in /modules/order), mounts
// the shared image read-only (/dev/vda) under the sandbox's own writable
// disk (/dev/vdb) with overlayfs, sets up /proc, /sys, /dev, /tmp and
// /dev/shm like the gVisor tier does, and starts the agent as PID 1 of the
// new root. Its settings come from /config.json, which the host appends to
// the initramfs for each sandbox.
//
// Any failure powers the guest off, which ends the sandbox with a reason.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
	"github.com/withruntime/withruntime/internal/guestnet"
)

const (
	agentSrc = "/sandbox-agent"
	agentDir = "/opt/withruntime"
	newRoot  = "/newroot"
)

func main() {
	if err := boot(); err != nil {
		fmt.Fprintf(os.Stderr, "microvm-init: %v\n", err)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func boot() error {
	mounts := []struct{ src, dst, typ, data string }{
		{"devtmpfs", "/dev", "devtmpfs", ""},
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
	}
	for _, m := range mounts {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, m.data); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	if cmdline, _ := os.ReadFile("/proc/cmdline"); strings.Contains(string(cmdline), guest.ProbeArg) {
		fmt.Println(guest.ProbeOK)
		return nil
	}
	if err := loadModules("/modules/order"); err != nil {
		return err
	}
	disks, err := findDisks(guest.SerialBase, guest.SerialDisk, guest.SerialConfig)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(disks[guest.SerialConfig])
	if err != nil {
		return err
	}
	var cfg guest.Config
	if err := json.Unmarshal(bytes.TrimRight(data, "\x00"), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	port, err := findPort(guest.PortName)
	if err != nil {
		return err
	}
	if err := mountRoot(cfg, disks[guest.SerialBase], disks[guest.SerialDisk]); err != nil {
		return err
	}
	if err := mountVolumes(cfg.Volumes); err != nil {
		return err
	}
	for path, content := range cfg.Files {
		dst := newRoot + "/" + strings.TrimPrefix(path, "/")
		if strings.Contains(path, "..") {
			return fmt.Errorf("file %q: not a plain path", path)
		}
		os.MkdirAll(dst[:strings.LastIndex(dst, "/")], 0o755)
		os.Remove(dst) // the image's may be a link
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if cfg.Net != nil {
		if err := guestnet.Configure(cfg.Net.Addr, cfg.Net.Prefix, cfg.Net.Gw); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return err
	}
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(newRoot, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	os.Chdir("/")
	env := append([]string{"WITHRUNTIME_CHANNEL=" + port}, cfg.Env...)
	return unix.Exec(agentDir+"/sandbox-agent", []string{agentDir + "/sandbox-agent"}, env)
}

// mountVolumes mounts each virtiofs share at its path in the new root,
// without set-user-id or devices; the host has already refused paths
// that shadow the root, /proc or the agent's own.
func mountVolumes(vols []guest.Volume) error {
	if len(vols) == 0 {
		return nil
	}
	if err := loadModules(guest.VolumeModules); err != nil {
		return err
	}
	for _, v := range vols {
		if !strings.HasPrefix(v.Path, "/") || strings.Contains(v.Path, "..") {
			return fmt.Errorf("volume %q: not a plain path", v.Path)
		}
		dst := newRoot + v.Path
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("volume %s: %w", v.Path, err)
		}
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if v.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount(v.Tag, dst, "virtiofs", flags, ""); err != nil {
			return fmt.Errorf("mounting volume %s: %w", v.Path, err)
		}
	}
	return nil
}

func loadModules(list string) error {
	order, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open("/modules/" + name + ".ko")
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("loading %s: %w", name, err)
		}
	}
	return nil
}

// waitDev waits for a device node the kernel makes as a driver probes.
func waitDev(path string) error {
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s never appeared", path)
}

// findDisks maps the serials the host gave its disks to their devices:
// the order virtio devices are found in is not the command line's.
func findDisks(serials ...string) (map[string]string, error) {
	found := map[string]string{}
	for i := 0; i < 1000; i++ {
		entries, _ := os.ReadDir("/sys/block")
		for _, e := range entries {
			b, err := os.ReadFile("/sys/block/" + e.Name() + "/serial")
			if err == nil {
				found[strings.TrimSpace(string(b))] = "/dev/" + e.Name()
			}
		}
		missing := false
		for _, s := range serials {
			if _, ok := found[s]; !ok {
				missing = true
			} else if _, err := os.Stat(found[s]); err != nil {
				missing = true
			}
		}
		if !missing {
			return found, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("disks %v never all appeared (found %v)", serials, found)
}

// findPort is the device of the virtio-serial port the host named (no
// udev here makes /dev/virtio-ports/ links).
func findPort(name string) (string, error) {
	for i := 0; i < 1000; i++ {
		entries, _ := os.ReadDir("/sys/class/virtio-ports")
		for _, e := range entries {
			b, err := os.ReadFile("/sys/class/virtio-ports/" + e.Name() + "/name")
			if err == nil && strings.TrimSpace(string(b)) == name {
				if err := waitDev("/dev/" + e.Name()); err != nil {
					return "", err
				}
				return "/dev/" + e.Name(), nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", fmt.Errorf("port %s never appeared", name)
}

func mountRoot(cfg guest.Config, base, disk string) error {
	for _, d := range []string{"/lower", "/disk", newRoot} {
		os.MkdirAll(d, 0o755)
	}
	if err := unix.Mount(base, "/lower", "ext4", unix.MS_RDONLY, "noload"); err != nil {
		return fmt.Errorf("mounting the image: %w", err)
	}
	if err := unix.Mount(disk, "/disk", "ext4", unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mounting the disk: %w", err)
	}
	for _, d := range []string{"/disk/upper", "/disk/work"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("overlay", newRoot, "overlay", 0, "lowerdir=/lower,upperdir=/disk/upper,workdir=/disk/work"); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	half := fmt.Sprintf("size=%dm,mode=1777", max(cfg.MemoryMiB/2, 1))
	mounts := []struct {
		src, dst, typ string
		flags         uintptr
		data          string
	}{
		{"/dev", "/dev", "", unix.MS_MOVE, ""},
		{"/proc", "/proc", "", unix.MS_MOVE, ""},
		{"/sys", "/sys", "", unix.MS_MOVE, ""},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"},
		{"shm", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, half},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, half},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", agentDir, "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	}
	for _, m := range mounts {
		dst := newRoot + m.dst
		os.MkdirAll(dst, 0o755)
		if err := unix.Mount(m.src, dst, m.typ, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	agent, err := os.ReadFile(agentSrc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(newRoot+agentDir+"/sandbox-agent", agent, 0o755); err != nil {
		return err
	}
	// The agent's copy is read-only for the guest's root too.
	return unix.Mount("", newRoot+agentDir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

package microvm

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// virtiofsd is QEMU's file server for virtio-fs (Debian's
// qemu-system-common ships it). It runs as root outside QEMU's jail and
// confines itself: new mount, pid and network namespaces, pivot_root into
// the share, a seccomp filter, and only the capabilities a file server
// needs (less mknod and setfcap here).
const virtiofsd = "/usr/lib/qemu/virtiofsd"

// virtiofsdFiles bounds the descriptors one virtiofsd holds: it keeps one
// per inode the guest has looked up, and the guest chooses how many.
const virtiofsdFiles = 16384

// volumeTag is the virtio-fs tag of a sandbox's n-th volume.
func volumeTag(n int) string { return "wr-vol-" + strconv.Itoa(n) }

// volumeSocket is the vhost-user socket of the n-th volume in the
// sandbox's run dir (QEMU's /run), and jailVolumeSocket the same in QEMU's
// jail.
func volumeSocket(p paths, n int) string { return filepath.Join(p.vm, "fs"+strconv.Itoa(n)+".sock") }
func jailVolumeSocket(n int) string      { return "/run/fs" + strconv.Itoa(n) + ".sock" }

// volumeView is where a read-only volume is bound read-only for its
// virtiofsd: the guest's root could remount its own mount writable, not
// this one.
func volumeView(p paths, n int) string { return filepath.Join(p.run, "vol", strconv.Itoa(n)) }

// guestVolumes are the shares the guest's init mounts.
func guestVolumes(spec sandbox.Spec) []guest.Volume {
	var out []guest.Volume
	for n, v := range spec.Volumes {
		out = append(out, guest.Volume{Tag: volumeTag(n), Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

// volumeArgs are QEMU's arguments for the volumes: vhost-user needs the
// guest's memory in a shared memfd (its server maps it) and virtio 1.0
// on the mmio transport; each volume is a vhost-user-fs device on its
// socket.
func volumeArgs(spec sandbox.Spec) []string {
	if len(spec.Volumes) == 0 {
		return nil
	}
	a := []string{
		"-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", spec.MemoryMiB),
		"-global", "virtio-mmio.force-legacy=false",
	}
	for n := range spec.Volumes {
		id := "fs" + strconv.Itoa(n)
		a = append(a, "-chardev", "socket,id="+id+",path="+jailVolumeSocket(n),
			"-device", "vhost-user-fs-device,chardev="+id+",tag="+volumeTag(n))
	}
	return a
}

// startVolumes starts one virtiofsd per volume, each on a listening
// socket only QEMU's user (uid) may connect to, each in the sandbox's
// cgroup before it runs a line of its own (a restart of the server, or
// of its service's cgroup, leaves them with QEMU; removing the cgroup
// ends them). A virtiofsd ends by itself when QEMU lets go of its socket.
// Their output goes to out, which must be bounded.
func (b *Backend) startVolumes(id string, p paths, spec sandbox.Spec, uid int, out io.Writer) (retErr error) {
	for n, v := range spec.Volumes {
		source := v.HostDir
		if v.ReadOnly {
			view, err := bindReadOnly(v.HostDir, volumeView(p, n))
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			source = view
		}
		sock := volumeSocket(p, n)
		os.Remove(sock)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		l.SetUnlinkOnClose(false)
		f, err := l.File()
		l.Close()
		if err != nil {
			return err
		}
		err = os.Chown(sock, uid, uid)
		if err == nil {
			err = os.Chmod(sock, 0o600)
		}
		if err == nil {
			err = b.runVirtiofsd(id, source, f, out)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	return nil
}

// runVirtiofsd starts virtiofsd on the listening socket f, serving
// source. A shell holds the start until the process is in the sandbox's
// cgroup (virtiofsd forks its namespaced server at once), and leaves
// SIGPIPE ignored, so a server gone does not end it through its output
// pipe.
func (b *Backend) runVirtiofsd(id, source string, f *os.File, out io.Writer) error {
	gate, release, err := os.Pipe()
	if err != nil {
		return err
	}
	defer gate.Close()
	defer release.Close()
	args := []string{"/bin/sh", "-c", `trap '' PIPE; read -r go || exit 1; exec "$@"`, "virtiofsd",
		virtiofsd, "--fd=3", "-o", "source=" + source, "-o", "sandbox=namespace",
		"-o", "cache=auto", "-o", "no_posix_lock", "-o", "no_flock", "-o", "no_xattr",
		"-o", "modcaps=-mknod:-setfcap", "-o", "log_level=err",
		"--rlimit-nofile=" + strconv.Itoa(virtiofsdFiles), "--thread-pool-size=0"}
	cmd := &exec.Cmd{Path: "/bin/sh", Args: args, Dir: "/", Env: []string{}, Stdin: gate, Stdout: out, Stderr: out}
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting virtiofsd: %w", err)
	}
	go cmd.Wait()
	if err := b.cg.Add(id, cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("cgroup: %w", err)
	}
	if _, err := release.Write([]byte("go\n")); err != nil {
		cmd.Process.Kill()
		return err
	}
	return nil
}

// bindReadOnly binds dir at view read-only, without set-user-id,
// devices or programs.
func bindReadOnly(dir, view string) (string, error) {
	if err := os.MkdirAll(view, 0o700); err != nil {
		return "", err
	}
	if !mounted(view) {
		if err := unix.Mount(dir, view, "", unix.MS_BIND, ""); err != nil {
			return "", err
		}
		if err := unix.Mount("", view, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			unix.Unmount(view, unix.MNT_DETACH)
			return "", err
		}
	}
	return view, nil
}

// releaseVolumes unmounts the read-only views. It reports an error when
// one stays mounted: the caller must not then remove the run dir, which
// would reach into the volume.
func releaseVolumes(p paths) error {
	dir := filepath.Join(p.run, "vol")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		view := filepath.Join(dir, e.Name())
		for mounted(view) {
			if err := unix.Unmount(view, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmounting %s: %w", view, err)
			}
		}
	}
	return nil
}

package agent

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/guestnet"
)

// POST /reseed: the host's first call to a sandbox started from a
// snapshot. Its memory is a copy of another sandbox's, so what its kernel
// made once at boot is its siblings' too:
//   - the boot id: gVisor makes one for each proc file system, so /proc is
//     mounted anew (the old one is detached: processes that hold it open
//     keep it). Linux keeps one per boot whatever the mount, so where the
//     new /proc still reads the old id, a file of a fresh one is bound
//     over it;
//   - the kernel's random generator, where the sandbox has one of its own
//     (a microVM's Linux): the host's entropy is added, credited, and the
//     generator reseeded. gVisor's generator reads the host's on every
//     call, so there is nothing of it to renew;
//   - a microVM's network: its kernel keeps the source's address, so the
//     host sends the sandbox's own (Net), which eth0, the default route
//     and the resolver take.
//
// What processes keep in their own memory (a Python process's random
// module, a TLS library's pools) is theirs and is copied as it is.

// maxEntropy bounds the entropy taken.
const maxEntropy = 512

func (s *Server) handleReseed(w http.ResponseWriter, r *http.Request) error {
	var req api.ReseedRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Entropy) == 0 || len(req.Entropy) > maxEntropy {
		return invalidf("entropy must be 1 to %d bytes", maxEntropy)
	}
	if n := req.Net; n != nil {
		if len(n.Resolver) > 4<<10 {
			return invalidf("resolver is over 4 KiB")
		}
		if err := guestnet.Configure(n.Addr, n.Prefix, n.Gw); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		os.Remove(resolvConf) // the image's may be a link
		if err := os.WriteFile(resolvConf, []byte(n.Resolver), 0o644); err != nil {
			return err
		}
	}
	// The kernel first: the boot id below is drawn from its generator.
	reseeded := addEntropy(req.Entropy) == nil
	old, err := os.ReadFile(bootIDPath)
	if err != nil {
		return err
	}
	if err := remountProc(); err != nil {
		return err
	}
	id, err := os.ReadFile(bootIDPath)
	if err != nil {
		return err
	}
	if bytes.Equal(id, old) {
		if id, err = bindBootID(); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, api.ReseedAnswer{BootID: strings.TrimSpace(string(id)), KernelReseeded: reseeded})
	return nil
}

const (
	bootIDPath = "/proc/sys/kernel/random/boot_id"
	resolvConf = "/etc/resolv.conf"
	// bootIDFile holds the boot id bound over a Linux /proc's (/run is
	// a memory file system: the id goes with the machine).
	bootIDFile = "/run/withruntime-boot_id"
)

// bindBootID binds a file of a fresh boot id over bootIDPath and returns
// it.
func bindBootID() ([]byte, error) {
	id, err := os.ReadFile("/proc/sys/kernel/random/uuid")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(bootIDFile+".tmp", id, 0o444); err != nil {
		return nil, err
	}
	if err := os.Rename(bootIDFile+".tmp", bootIDFile); err != nil {
		return nil, err
	}
	if err := unix.Mount(bootIDFile, bootIDPath, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("binding the boot id: %w", err)
	}
	unix.Mount("", bootIDPath, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	return id, nil
}

// remountProc puts a new proc file system on /proc.
func remountProc() error {
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting /proc: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	return nil
}

// addEntropy adds b to the kernel's pool, credited, and reseeds its
// generator (RNDADDENTROPY, RNDRESEEDCRNG).
func addEntropy(b []byte) error {
	f, err := os.OpenFile("/dev/random", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info: entropy_count (bits), buf_size, buf[].
	buf := make([]byte, 8+len(b))
	*(*int32)(unsafe.Pointer(&buf[0])) = int32(8 * len(b))
	*(*int32)(unsafe.Pointer(&buf[4])) = int32(len(b))
	copy(buf[8:], b)
	if err := ioctl(f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&buf[0]))); err != nil {
		return err
	}
	return ioctl(f.Fd(), unix.RNDRESEEDCRNG, 0)
}

func ioctl(fd, req, arg uintptr) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, req, arg); e != 0 {
		return e
	}
	return nil
}

package microvm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
)

// Modules are the guest kernel's modules the initramfs loads, in order
// (each after what it depends on); the rest of what the guest needs
// (ext4, the serial console) is built into Debian's cloud kernel.
var Modules = []string{"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "virtio_console", "failover", "net_failover", "virtio_net", "overlay"}

// VolumeModules are loaded after Modules, only by a guest that mounts
// volumes (guest.VolumeModules lists them in the initramfs).
var VolumeModules = []string{"fuse", "virtiofs"}

// allModules is every module setup keeps and the initramfs holds.
func allModules() []string { return append(append([]string{}, Modules...), VolumeModules...) }

// KernelDir is where setup keeps guest kernels: <dir>/<version>/vmlinuz
// and modules/, and <dir>/current names the version in use.
func KernelDir(cacheDir string) string { return filepath.Join(cacheDir, "microvm", "kernel") }

// currentKernel is the directory of the kernel setup chose.
func currentKernel(cacheDir string) (string, string, error) {
	v, err := os.ReadFile(filepath.Join(KernelDir(cacheDir), "current"))
	if err != nil {
		return "", "", fmt.Errorf("no guest kernel: run `withruntime setup`")
	}
	version := strings.TrimSpace(string(v))
	dir := filepath.Join(KernelDir(cacheDir), version)
	if _, err := os.Stat(filepath.Join(dir, "vmlinuz")); err != nil {
		return "", "", fmt.Errorf("guest kernel %s is missing: run `withruntime setup`", version)
	}
	return dir, version, nil
}

// treeLayout changes whenever jailRoot lays its tree out differently, so
// that a cached tree of an older layout is not used.
const treeLayout = 3

// qemuBinary is Debian's QEMU.
const qemuBinary = "/usr/bin/qemu-system-x86_64"

// firmware are QEMU's files a microvm machine loads.
var firmware = []string{"bios-microvm.bin", "qboot.rom", "linuxboot_dma.bin", "kvmvapic.bin", "pvh.bin"}

// jailRoot builds, once per content, the read-only tree QEMU is chrooted
// into: QEMU, the libraries it links, its firmware, and boot/ with the
// guest kernel and the initramfs (the init, the agent and the modules).
// It returns the tree's directory.
func jailRoot(cacheDir, agent, initBin string) (string, error) {
	kdir, kversion, err := currentKernel(cacheDir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(qemuBinary); err != nil {
		return "", fmt.Errorf("%s is missing: run `withruntime setup`", qemuBinary)
	}
	libs, err := linkedLibs(qemuBinary)
	if err != nil {
		return "", err
	}
	initrd, err := initramfs(kdir, agent, initBin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, treeLayout, kversion)
	for _, p := range append([]string{qemuBinary}, libs...) {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, p, fi.Size(), fi.ModTime().UnixNano())
	}
	h.Write(initrd)
	dir := filepath.Join(cacheDir, "microvm", "root", hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".root-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".root-"); err != nil {
			return "", err
		}
	}
	os.Chmod(tmp, 0o755)
	copies := map[string]string{qemuBinary: qemuBinary, filepath.Join(kdir, "vmlinuz"): "/boot/vmlinuz"}
	for _, l := range libs {
		copies[l] = l
	}
	// QEMU loads its TCG accelerator as a module.
	if p := "/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so"; exists(p) {
		copies[p] = p
	}
	for _, f := range firmware {
		if p := filepath.Join("/usr/share/qemu", f); exists(p) {
			copies[p] = p
		}
	}
	for src, dst := range copies {
		if err := copyFile(src, filepath.Join(tmp, dst)); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "boot", "initrd.img"), initrd, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	// Mount points: run/ (the sandbox's writable directory), dev/null and
	// dev/kvm.
	os.MkdirAll(filepath.Join(tmp, "run"), 0o755)
	os.MkdirAll(filepath.Join(tmp, "dev"), 0o755)
	os.WriteFile(filepath.Join(tmp, "dev", "kvm"), nil, 0o644)
	os.WriteFile(filepath.Join(tmp, "dev", "null"), nil, 0o644)
	os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644)
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if exists(filepath.Join(dir, ".done")) { // another server won
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

var lddPath = regexp.MustCompile(`(/\S+)`)

// linkedLibs lists the shared libraries bin loads, the dynamic loader
// included, by their real paths.
func linkedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := lddPath.FindString(line); m != "" {
			libs = append(libs, m)
		}
	}
	return libs, nil
}

// copyFile copies src's content to dst (symbolic links resolved), making
// dst's directories.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, fi.Mode().Perm()&0o755)
}

// initramfs is the guest's initramfs: /init, /sandbox-agent and the
// modules with their order.
func initramfs(kdir, agent, initBin string) ([]byte, error) {
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	for _, d := range []string{"dev", "proc", "sys", "modules"} {
		if err := c.dir(d); err != nil {
			return nil, err
		}
	}
	for _, f := range [][2]string{{"init", initBin}, {"sandbox-agent", agent}} {
		name, src := f[0], f[1]
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("%w: run `withruntime setup`", err)
		}
		if err := c.file(name, 0o755, data); err != nil {
			return nil, err
		}
	}
	for _, m := range allModules() {
		data, err := os.ReadFile(filepath.Join(kdir, "modules", m+".ko"))
		if err != nil {
			return nil, fmt.Errorf("guest kernel module: %w: run `withruntime setup`", err)
		}
		if err := c.file("modules/"+m+".ko", 0o644, data); err != nil {
			return nil, err
		}
	}
	if err := c.file("modules/order", 0o644, []byte(strings.Join(Modules, "\n")+"\n")); err != nil {
		return nil, err
	}
	if err := c.file(strings.TrimPrefix(guest.VolumeModules, "/"), 0o644, []byte(strings.Join(VolumeModules, "\n")+"\n")); err != nil {
		return nil, err
	}
	if err := c.close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Compat is what a microVM's saved machine (a pause's, a snapshot's)
// needs of the host that resumes it, as text for the host's compat hash:
// QEMU's build (its size and time: its migration stream is read only by a
// QEMU that can) and the guest kernel installed. What it cannot read
// counts as empty, on a host without microVMs too.
func Compat(cacheDir string) string {
	var b strings.Builder
	if fi, err := os.Stat(qemuBinary); err == nil {
		fmt.Fprintf(&b, "qemu\x00%d\x00%d\x00", fi.Size(), fi.ModTime().UnixNano())
	}
	kernel, _ := os.ReadFile(filepath.Join(KernelDir(cacheDir), "current"))
	fmt.Fprintf(&b, "guest-kernel\x00%s", strings.TrimSpace(string(kernel)))
	return b.String()
}

package microvm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// probeTimeout bounds the probe's boot: a guest under working KVM prints
// its answer in well under a second; this host's nested KVM hangs.
const probeTimeout = 8 * time.Second

// ProbeKVM reports whether QEMU boots the guest kernel with KVM on this
// host. It boots the guest once (init answers and powers off at once) and
// keeps the answer in the cache, keyed by the kernel and QEMU, so that
// later servers do not wait.
func ProbeKVM(ctx context.Context, cacheDir string) bool {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return false
	}
	_, version, err := currentKernel(cacheDir)
	if err != nil {
		return false
	}
	qemu, err := os.Stat(qemuBinary)
	if err != nil {
		return false
	}
	key := version + " " + qemu.ModTime().UTC().Format(time.RFC3339Nano)
	cache := filepath.Join(cacheDir, "microvm", "kvm-probe")
	if data, err := os.ReadFile(cache); err == nil {
		if k, answer, ok := strings.Cut(strings.TrimSpace(string(data)), "\t"); ok && k == key {
			return answer == "yes"
		}
	}
	ok := bootProbe(ctx, cacheDir)
	answer := "no"
	if ok {
		answer = "yes"
	}
	os.WriteFile(cache+".tmp", []byte(key+"\t"+answer+"\n"), 0o644)
	os.Rename(cache+".tmp", cache)
	return ok
}

func bootProbe(ctx context.Context, cacheDir string) bool {
	bin := filepath.Join(cacheDir, "bin")
	root, err := jailRoot(cacheDir, filepath.Join(bin, "sandbox-agent"), filepath.Join(bin, "microvm-init"))
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemuBinary,
		"-M", "microvm,rtc=on,pit=on,pic=on,isa-serial=on", "-accel", "kvm", "-cpu", "host",
		"-m", "256", "-smp", "1", "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-kernel", filepath.Join(root, jailKernel), "-initrd", filepath.Join(root, jailInitrd),
		"-append", "console=ttyS0 panic=-1 quiet withruntime.probe", "-serial", "stdio")
	out, _ := cmd.Output()
	return bytes.Contains(out, []byte(probeOK))
}

// probeOK is what the guest's init prints when booted to probe.
const probeOK = "withruntime-probe-ok"

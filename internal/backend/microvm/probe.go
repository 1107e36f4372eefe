package microvm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/backend/microvm/guest"
	"github.com/withruntime/withruntime/internal/lines"
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
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := RawBoot(ctx, cacheDir, "kvm")
	return err == nil
}

// RawBoot boots the guest's kernel and init under accel ("kvm" or "tcg"),
// with QEMU's machine and command line but none of a sandbox (no jail, no
// disks, no agent): init answers at once and powers off. It returns the
// time from QEMU's start to that answer: the floor under a sandbox's boot,
// which the benchmark prints as a baseline.
func RawBoot(ctx context.Context, cacheDir, accel string) (time.Duration, error) {
	bin := filepath.Join(cacheDir, "bin")
	root, err := jailRoot(cacheDir, filepath.Join(bin, "sandbox-agent"), filepath.Join(bin, "microvm-init"))
	if err != nil {
		return 0, err
	}
	b := &Backend{cfg: Config{Accel: accel}}
	args := []string{
		"-M", "microvm,rtc=on,pit=on,pic=on,isa-serial=on", "-accel", b.accel(),
		"-m", "256", "-smp", "1", "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-kernel", filepath.Join(root, jailKernel), "-initrd", filepath.Join(root, jailInitrd),
		"-append", b.kernelArgs() + " " + guest.ProbeArg, "-serial", "stdio",
	}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	cmd := exec.CommandContext(ctx, qemuBinary, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// The guest's console, read a bounded line at a time as the scanner's
	// default bound read it: a longer line ends the reading.
	sc := lines.New(out, bufio.MaxScanTokenSize)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(guest.ProbeOK)) {
			return time.Since(start), nil
		}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return 0, errors.New("the guest powered off without answering")
}

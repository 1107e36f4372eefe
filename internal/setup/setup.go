package setup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/backend/microvm"
	"github.com/withruntime/withruntime/internal/image"
)

// Options say where to install and where the source is.
type Options struct {
	CacheDir string
	// SourceDir is the project's checkout, whose go.mod pins gVisor.
	SourceDir string
	Out       io.Writer
}

// debPackages are the host's Debian packages: mmdebstrap builds the image,
// iproute2 and nftables serve the network plumbing.
// qemu-system-x86 runs microVMs. e2fsprogs (mkfs.ext4) makes volumes'
// file systems (internal/volume); Debian installs it by default, a slim
// image may not.
var debPackages = []string{"mmdebstrap", "iproute2", "nftables", "iptables", "ca-certificates", "qemu-system-x86", "e2fsprogs"}

const gvisorModule = "gvisor.dev/gvisor"

// Run performs every step, printing progress.
func Run(ctx context.Context, o Options) error {
	if os.Geteuid() != 0 {
		return errors.New("setup needs root")
	}
	steps := []struct {
		name string
		fn   func(context.Context, Options) error
	}{
		{"Debian packages", installPackages},
		{"runsc", buildRunsc},
		{"sandbox agent", buildAgent},
		{"default image", buildImage},
		{"microVM guest", buildGuest},
	}
	for i, s := range steps {
		start := time.Now()
		fmt.Fprintf(o.Out, "[%d/%d] %s\n", i+1, len(steps), s.name)
		if err := s.fn(ctx, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(o.Out, "[%d/%d] %s: done in %s\n", i+1, len(steps), s.name, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

func installPackages(ctx context.Context, o Options) error {
	var missing []string
	for _, p := range debPackages {
		if exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Run() != nil {
			missing = append(missing, p)
			continue
		}
		out, _ := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		fmt.Fprintln(o.Out, "    all installed")
		return nil
	}
	fmt.Fprintf(o.Out, "    installing %s\n", strings.Join(missing, " "))
	if err := run(ctx, o, "", nil, "apt-get", "update", "-qq"); err != nil {
		return err
	}
	return run(ctx, o, "", []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)...)
}

// pinnedGvisor reads the gVisor version from the source's go.mod.
func pinnedGvisor(src string) (string, error) {
	f, err := os.Open(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading go.mod (is --source the project's checkout?): %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == gvisorModule && i+1 < len(fields) {
				return fields[i+1], nil
			}
		}
	}
	return "", errors.New("go.mod does not pin gvisor.dev/gvisor")
}

func buildRunsc(ctx context.Context, o Options) error {
	version, err := pinnedGvisor(o.SourceDir)
	if err != nil {
		return err
	}
	bin := filepath.Join(o.CacheDir, "bin", "runsc")
	stamp := bin + ".version"
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == version {
		if _, err := os.Stat(bin); err == nil {
			fmt.Fprintf(o.Out, "    runsc %s: cached\n", version)
			return nil
		}
	}
	fmt.Fprintf(o.Out, "    building runsc %s statically (a minute or two the first time)\n", version)
	if err := goBuild(ctx, o, bin, gvisorModule+"/runsc"); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(version+"\n"), 0o644)
}

func buildAgent(ctx context.Context, o Options) error {
	return goBuild(ctx, o, filepath.Join(o.CacheDir, "bin", "sandbox-agent"), "./cmd/sandbox-agent")
}

// goBuild builds a static binary: after runsc's pivot_root there is no
// dynamic loader, so cgo binaries die at start.
func goBuild(ctx context.Context, o Options, out, pkg string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := run(ctx, o, o.SourceDir, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", tmp, pkg); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// buildGuest makes what microVMs boot: the guest init, the kernel the
// archive serves today, and the default image as an ext4 disk.
func buildGuest(ctx context.Context, o Options) error {
	if err := goBuild(ctx, o, filepath.Join(o.CacheDir, "bin", "microvm-init"), "./cmd/microvm-init"); err != nil {
		return err
	}
	if err := microvm.InstallKernel(ctx, o.CacheDir, indent{o.Out}); err != nil {
		return err
	}
	return microvm.BuildBaseDisk(ctx, o.CacheDir, image.Default, indent{o.Out})
}

func buildImage(ctx context.Context, o Options) error {
	_, err := image.Build(ctx, o.CacheDir, image.Default, indent{o.Out})
	return err
}

func run(ctx context.Context, o Options, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = indent{o.Out}, indent{o.Out}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// indent writes output of sub-steps four spaces in.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			io.WriteString(i.w, "    "+line)
		}
	}
	return len(p), nil
}

package microvm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/internal/image"
)

// kernelPackage is Debian's metapackage of the cloud kernel: it depends
// on the versioned package the archive serves today.
const kernelPackage = "linux-image-cloud-amd64"

// InstallKernel fetches the cloud kernel the archive serves (never
// installing it as the host's), keeps its vmlinuz and the modules the
// guest loads under KernelDir/<version>, and records that version as
// current. A version already there is kept as it is.
func InstallKernel(ctx context.Context, cacheDir string, out io.Writer) error {
	deps, err := exec.CommandContext(ctx, "apt-cache", "depends", kernelPackage).Output()
	if err != nil {
		return fmt.Errorf("apt-cache depends %s: %w", kernelPackage, err)
	}
	var pkg string
	for _, line := range strings.Split(string(deps), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			pkg = f[1]
			break
		}
	}
	if pkg == "" {
		return fmt.Errorf("%s names no kernel package", kernelPackage)
	}
	ver, err := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", pkg).Output()
	if err != nil {
		return fmt.Errorf("apt-cache show %s: %w", pkg, err)
	}
	var debVersion string
	for _, line := range strings.Split(string(ver), "\n") {
		if v, ok := strings.CutPrefix(line, "Version: "); ok {
			debVersion = strings.TrimSpace(v)
			break
		}
	}
	version := strings.TrimPrefix(pkg, "linux-image-") + "_" + debVersion
	dir := filepath.Join(KernelDir(cacheDir), version)
	cached := exists(filepath.Join(dir, ".done"))
	missing := missingModules(dir)
	if cached && len(missing) == 0 {
		fmt.Fprintf(out, "guest kernel %s: cached\n", version)
		return setCurrent(cacheDir, version)
	}
	if cached {
		fmt.Fprintf(out, "guest kernel %s: fetching modules %v\n", version, missing)
	} else {
		fmt.Fprintf(out, "fetching guest kernel %s\n", version)
	}
	tmp, err := os.MkdirTemp("", "withruntime-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755) // apt's download user writes here
	get := exec.CommandContext(ctx, "apt-get", "download", "-q", pkg+"="+debVersion)
	get.Dir, get.Stdout, get.Stderr = tmp, out, out
	if err := get.Run(); err != nil {
		return fmt.Errorf("apt-get download %s: %w", pkg, err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d packages", pkg, len(debs))
	}
	x := filepath.Join(tmp, "x")
	if b, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x: %v: %s", err, b)
	}
	found := map[string]string{}
	filepath.WalkDir(filepath.Join(x, "lib", "modules"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found[strings.TrimSuffix(d.Name(), ".ko")] = p
		}
		return nil
	})
	if cached {
		// A kernel kept by an earlier setup, before the guest needed
		// these: each is added whole (a copy, then a rename).
		for _, m := range missing {
			src, ok := found[m]
			if !ok {
				return fmt.Errorf("%s has no module %s", pkg, m)
			}
			dst := filepath.Join(dir, "modules", m+".ko")
			if err := copyFile(src, dst+".tmp"); err != nil {
				return err
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				return err
			}
		}
		return setCurrent(cacheDir, version)
	}
	kernels, _ := filepath.Glob(filepath.Join(x, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return fmt.Errorf("%s holds %d kernels", pkg, len(kernels))
	}
	stage := dir + ".tmp"
	os.RemoveAll(stage)
	if err := copyFile(kernels[0], filepath.Join(stage, "vmlinuz")); err != nil {
		return err
	}
	for _, m := range allModules() {
		src, ok := found[m]
		if !ok {
			return fmt.Errorf("%s has no module %s", pkg, m)
		}
		if err := copyFile(src, filepath.Join(stage, "modules", m+".ko")); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, ".done"), nil, 0o644); err != nil {
		return err
	}
	if err := os.Rename(stage, dir); err != nil {
		return err
	}
	return setCurrent(cacheDir, version)
}

// missingModules are the modules the guest needs that a kernel dir lacks.
func missingModules(dir string) []string {
	var missing []string
	for _, m := range allModules() {
		if !exists(filepath.Join(dir, "modules", m+".ko")) {
			missing = append(missing, m)
		}
	}
	return missing
}

func setCurrent(cacheDir, version string) error {
	p := filepath.Join(KernelDir(cacheDir), "current")
	if err := os.WriteFile(p+".tmp", []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// BaseDisk is the path of an image's read-only ext4 disk.
func BaseDisk(cacheDir string, r image.Recipe) string {
	return filepath.Join(image.Dir(cacheDir, r), "rootfs.ext4")
}

// BuildBaseDisk makes the image's ext4 disk once: every microVM of the
// image shares it, read-only.
func BuildBaseDisk(ctx context.Context, cacheDir string, r image.Recipe, out io.Writer) error {
	disk := BaseDisk(cacheDir, r)
	if exists(disk) {
		fmt.Fprintln(out, "image disk: cached")
		return nil
	}
	rootfs := filepath.Join(image.Dir(cacheDir, r), "rootfs")
	du, err := exec.CommandContext(ctx, "du", "-sm", rootfs).Output()
	if err != nil {
		return fmt.Errorf("du %s: %w", rootfs, err)
	}
	var mib int
	fmt.Sscan(string(du), &mib)
	size := mib + mib/4 + 256
	fmt.Fprintf(out, "making the image's ext4 disk (%d MiB)\n", size)
	tmp := disk + ".tmp"
	os.Remove(tmp)
	mk := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "withruntime", "-m", "0", "-d", rootfs, "-E", "root_owner=0:0", tmp, fmt.Sprintf("%dM", size))
	if b, err := mk.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.ext4: %v: %s", err, b)
	}
	os.Chmod(tmp, 0o444)
	return os.Rename(tmp, disk)
}

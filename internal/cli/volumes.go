package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// volumeVerbs are the verbs of "withruntime volume".
func (a *App) volumeVerbs() []leaf {
	return []leaf{
		{use: "create NAME --size-gib N [--json]", short: "make a named persistent volume", about: volumeCreateAbout, define: a.volumeCreate},
		{use: "ls [--json]", short: "list volumes", aliases: []string{"list"},
			about: "Lists the volumes of the key's account: size, bytes used and the sandboxes that mount each.", define: a.volumeList},
		{use: "rm NAME...", short: "remove volumes and their files",
			about: "Removes volumes and everything in them; refused while a live or paused sandbox mounts one. Prints each name removed.", define: a.volumeRemove},
		{use: "cp SRC DST", short: "copy a file or directory to or from NAME:/PATH, without a sandbox", about: volumeCpAbout, define: a.volumeCp},
	}
}

const volumeCreateAbout = `Makes a named persistent volume of the key's account. Sandboxes mount it at
create (sandbox create --volume NAME:/PATH[:ro]): any number read-only, one at
a time writable. It outlives them; its size is enforced inside (writes past it
fail with ENOSPC) and counts against the account's storage quota.`

const volumeCpAbout = `Copies between a volume and the local disk without a sandbox. One side is
NAME:/PATH (a path inside volume NAME), the other a local path. A directory
goes as a tar stream; symbolic links in the volume are copied as links and
never followed.`

func (a *App) volumeCreate(cmd *command, s streams) runFunc {
	size := cmd.fs.Int("size-gib", 0, "the volume's size in `GIB` (required)")
	asJSON := cmd.fs.Bool("json", false, "print the volume as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one volume NAME, got %d arguments", len(pos))
		}
		if *size < 1 {
			return cmd.usageError(s, "--size-gib N is required (at least 1)")
		}
		c, done, _, err := a.connectTrial(ctx, s, false, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		v, err := c.CreateVolume(ctx, pos[0], *size)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, v)
		}
		fmt.Fprintln(s.stdout, v.Name)
		return exitOK
	}
}

func (a *App) volumeList(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.Volume]{
		cmd: cmd, trial: new(bool),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Volume, error) {
			return c.ListVolumes(ctx)
		},
		asJSON: func(l []api.Volume) any { return api.VolumeList{Volumes: l} },
		header: "NAME\tSIZE\tUSED\tMOUNTED BY\tCREATED",
		row: func(v api.Volume) string {
			by := strings.Join(v.MountedBy, ",")
			if by == "" {
				by = "-"
			}
			return fmt.Sprintf("%s\t%d GiB\t%d MiB\t%s\t%s", v.Name, v.SizeGiB, v.UsedBytes>>20, by, timeString(&v.CreatedAt))
		},
	})
}

func (a *App) volumeRemove(cmd *command, s streams) runFunc {
	return func(ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one volume NAME")
		}
		c, done, _, err := a.connectTrial(ctx, s, false, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		return removeEach(ctx, s, pos, c.DeleteVolume)
	}
}

// volumeSide splits NAME:/PATH; ok is false for a local path.
func volumeSide(arg string) (name, p string, ok bool) {
	name, p, ok = strings.Cut(arg, ":")
	if !ok || name == "" || !strings.HasPrefix(p, "/") || strings.ContainsAny(name, `/\`) {
		return "", "", false
	}
	return name, p, true
}

func (a *App) volumeCp(cmd *command, s streams) runFunc {
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 2 {
			return cmd.usageError(s, "want SRC and DST, one of them NAME:/PATH")
		}
		sn, sp, sRemote := volumeSide(pos[0])
		dn, dp, dRemote := volumeSide(pos[1])
		if sRemote == dRemote {
			return cmd.usageError(s, "one of SRC and DST must be NAME:/PATH (a volume's path), the other a local path")
		}
		c, done, _, err := a.connectTrial(ctx, s, false, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		if sRemote {
			err = volumeCopyOut(ctx, c, sn, sp, pos[1])
		} else {
			err = volumeCopyIn(ctx, c, pos[0], dn, dp)
		}
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		return exitOK
	}
}

// volumeCopyOut copies a volume's file or directory to dst: into dst when
// it is a directory that exists, else as dst.
func volumeCopyOut(ctx context.Context, c *client.Client, name, p, dst string) error {
	isDir, err := c.VolumePathIsDir(ctx, name, p)
	if err != nil {
		return err
	}
	target := dst
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() && p != "/" {
		target = filepath.Join(dst, path.Base(p))
	}
	if isDir {
		return c.DownloadVolumeDir(ctx, name, p, target)
	}
	rc, err := c.OpenVolumeFile(ctx, name, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// volumeCopyIn copies the local src to a volume's path: a file becomes p,
// or lands inside it when p ends in "/" or is a directory; a directory's
// tree lands in p.
func volumeCopyIn(ctx context.Context, c *client.Client, src, name, p string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(client.WriteTar(pw, src)) }()
		defer pr.Close()
		return c.UploadVolumeArchive(ctx, name, p, pr)
	}
	if strings.HasSuffix(p, "/") {
		p += filepath.Base(src)
	} else if isDir, err := c.VolumePathIsDir(ctx, name, p); err == nil && isDir {
		p = path.Join(p, filepath.Base(src)) // into an existing directory, as cp does
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.WriteVolumeFile(ctx, name, p, f)
}

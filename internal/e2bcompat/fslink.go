package e2bcompat

import (
	"context"
	"path"
	"sort"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// maxLinkHops is how many links in a row followLink follows before it
// treats the chain as a loop, as the kernel's own limit does.
const maxLinkHops = 40

// followLink is fi as E2B's daemon describes a symbolic link: with the type
// of what the chain of links finally names and that target's absolute path
// (a link to a file is a file, with symlink_target set). A link that
// dangles, loops or cannot be read stays a symlink whose target is its own
// text made absolute. Anything else is returned as it is.
func followLink(ctx context.Context, sb *Sandbox, fi api.FileInfo) api.FileInfo {
	if fi.Type != api.FileTypeSymlink {
		return fi
	}
	fi.Target = linkTarget(fi.Path, fi.Target)
	cur := fi
	for range maxLinkHops {
		t := linkTarget(cur.Path, cur.Target)
		next, err := statAs(ctx, sb, t)
		if err != nil {
			return fi
		}
		if next.Type != api.FileTypeSymlink {
			fi.Type, fi.Target = next.Type, t
			return fi
		}
		next.Path = t
		cur = *next
	}
	return fi
}

// linkTarget is the absolute path a link at p with text target names.
func linkTarget(p, target string) string {
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(p), target)
}

// sortWalk orders entries as a depth-first walk that visits each
// directory's entries by name does (E2B's daemon lists that way): each
// directory is followed by what is under it, before its next sibling.
func sortWalk(entries []api.FileInfo) {
	sort.SliceStable(entries, func(i, j int) bool {
		return walkLess(entries[i].Path, entries[j].Path)
	})
}

// walkLess compares two paths name by name, so "a/c" (inside a) comes
// before its parent's next sibling "a-b", which a plain string order puts
// first.
func walkLess(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

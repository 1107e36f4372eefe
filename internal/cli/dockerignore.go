package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/withruntime/withruntime/client"
)

// contextSkip reads CONTEXT/.dockerignore, when there is one, into what
// client.WriteTarSkipping leaves out of a build's context: Docker's rules,
// read and matched by the library Docker's own builder uses (patterns
// relative to the context, "**", "!" taking a path back, the last match
// winning). nil when the context has none.
func contextSkip(contextDir string) (func(string, bool) (client.Skip, error), error) {
	f, err := os.Open(filepath.Join(contextDir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return func(rel string, dir bool) (client.Skip, error) {
		ignored, err := pm.MatchesOrParentMatches(rel)
		switch {
		case err != nil || !ignored:
			return client.Keep, err
		case dir && pm.Exclusions():
			// A "!" pattern may take back something below it: look inside.
			return client.Leave, nil
		case dir:
			return client.Prune, nil
		}
		return client.Leave, nil
	}, nil
}

package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// BoltFile is the name of the embedded store's file in the data dir.
const BoltFile = "withruntime.db"

// Open opens the store a server is configured with: rawURL "" is the
// embedded store in dataDir (a single box), a postgres:// or postgresql://
// URL the shared database of many hosts. Errors never show the URL's
// password.
func Open(ctx context.Context, rawURL, dataDir string) (Store, error) {
	switch {
	case rawURL == "":
		if dataDir == "" {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "the embedded store needs a data dir")
		}
		b, err := OpenBolt(filepath.Join(dataDir, BoltFile))
		if err != nil {
			return nil, err
		}
		return b, nil
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		p, err := OpenPostgres(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	scheme := "no scheme"
	if i := strings.Index(rawURL, "://"); i > 0 && !strings.ContainsAny(rawURL[:i], "@:/") {
		scheme = fmt.Sprintf("scheme %q", rawURL[:i])
	}
	// The string is not shown: it may hold a password.
	return nil, sandbox.Errorf(sandbox.KindInvalid,
		"store URL with %s: want none (the embedded store in the data dir) or postgres://USER:PASSWORD@HOST:PORT/DATABASE (or postgresql://)", scheme)
}

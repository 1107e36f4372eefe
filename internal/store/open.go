package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
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
		if host, mode, weak := unverifiedTLS(rawURL); weak {
			// Warned, not refused: a private network may be trusted. The
			// URL is not logged: it may hold a password.
			slog.Warn("the store's connection does not verify the database server: whoever can reach the path to it can pose as it and be sent the password; use sslmode=verify-full with sslrootcert",
				"host", host, "sslmode", mode)
		}
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

// unverifiedTLS reports whether a PostgreSQL URL connects to a server off
// this host without verifying its certificate (sslmode other than
// verify-ca and verify-full, as given or from PGSSLMODE; pgx's default,
// prefer, verifies nothing), and to which host with which mode.
func unverifiedTLS(rawURL string) (host, mode string, weak bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", false // the open says it does not parse
	}
	q := u.Query()
	mode = cmp.Or(q.Get("sslmode"), os.Getenv("PGSSLMODE"), "prefer")
	if mode == "verify-ca" || mode == "verify-full" {
		return "", mode, false
	}
	// Hosts come from the URL (h1:p1,h2:p2), a host parameter, or
	// PGHOST; none is a local socket.
	var hosts []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		hosts = append(hosts, strings.Trim(h, "[]"))
	}
	for _, v := range q["host"] {
		hosts = append(hosts, strings.Split(v, ",")...)
	}
	if len(hosts) == 0 && os.Getenv("PGHOST") != "" {
		hosts = strings.Split(os.Getenv("PGHOST"), ",")
	}
	for _, h := range hosts {
		if !local(h) {
			return h, mode, true
		}
	}
	return "", mode, false
}

// local reports whether a PostgreSQL host is on this host: a Unix socket
// dir, localhost or a loopback address.
func local(h string) bool {
	if h == "" || strings.HasPrefix(h, "/") || strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

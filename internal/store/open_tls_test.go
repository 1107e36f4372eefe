package store

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestUnverifiedTLS(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	t.Setenv("PGHOST", "")
	tests := []struct {
		url      string
		env      string // PGSSLMODE
		wantWeak bool
		wantHost string
	}{
		{"postgres://u:pw@db.internal:5432/d?sslmode=require", "", true, "db.internal"},
		{"postgres://u@db.internal/d", "", true, "db.internal"}, // pgx's default, prefer
		{"postgres://u@db.internal/d?sslmode=disable", "", true, "db.internal"},
		{"postgres://u@10.0.0.5/d?sslmode=prefer", "", true, "10.0.0.5"},
		{"postgresql://u@[2001:db8::1]:5432/d?sslmode=allow", "", true, "2001:db8::1"},
		{"postgres://u@127.0.0.1:1,db.internal:2/d?sslmode=require", "", true, "db.internal"},
		{"postgres://u@/d?host=db.internal&sslmode=require", "", true, "db.internal"},
		{"postgres://u@db.internal/d", "require", true, "db.internal"},
		{"postgres://u@db.internal/d?sslmode=verify-full&sslrootcert=/ca.pem", "", false, ""},
		{"postgres://u@db.internal/d?sslmode=verify-ca&sslrootcert=/ca.pem", "", false, ""},
		{"postgres://u@db.internal/d", "verify-full", false, ""},
		{"postgres://u:pw@127.0.0.1:55432/d?sslmode=disable", "", false, ""},
		{"postgres://u@localhost/d?sslmode=disable", "", false, ""},
		{"postgres://u@[::1]:5432/d?sslmode=disable", "", false, ""},
		{"postgres://u@/d?host=/var/run/postgresql", "", false, ""},
		{"postgres:///d", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.url+" "+tt.env, func(t *testing.T) {
			t.Setenv("PGSSLMODE", tt.env)
			host, _, weak := unverifiedTLS(tt.url)
			if weak != tt.wantWeak || host != tt.wantHost {
				t.Errorf("got weak %v on %q, want %v on %q", weak, host, tt.wantWeak, tt.wantHost)
			}
		})
	}
}

// TestOpenWarnsUnverifiedTLS: opening a store off this host without a
// verified certificate logs a warning, which never shows the password.
func TestOpenWarnsUnverifiedTLS(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	// A cancelled open: the warning comes before any connection.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		url  string
		warn bool
	}{
		{"postgres://u:s3cr3t-pw@db.invalid:5432/d?sslmode=require", true},
		{"postgres://u:s3cr3t-pw@db.invalid:5432/d?sslmode=verify-full", false},
		{"postgres://u:s3cr3t-pw@127.0.0.1:1/d?sslmode=disable", false},
	} {
		logs.Reset()
		if st, err := Open(ctx, tt.url, ""); err == nil {
			st.Close()
		}
		got := logs.String()
		if warned := strings.Contains(got, "does not verify the database server"); warned != tt.warn {
			t.Errorf("%s: warned %v, want %v (log %q)", tt.url, warned, tt.warn, got)
		}
		if strings.Contains(got, "s3cr3t-pw") {
			t.Errorf("%s: the log shows the password: %q", tt.url, got)
		}
		if tt.warn && !strings.Contains(got, "host=db.invalid") {
			t.Errorf("%s: the warning does not name the host: %q", tt.url, got)
		}
	}
}

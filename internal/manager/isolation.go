package manager

import (
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// offered lists the isolations this server runs: a plain backend runs its
// own only.
func (m *Manager) offered() []string { return m.backend().Offered() }

// Isolations lists the isolations this server runs, its default first:
// what a node registers, so that placement sends a create only to a node
// that runs its isolation.
func (m *Manager) Isolations() []string {
	def := m.backend().Name()
	out := []string{def}
	for _, n := range m.offered() {
		if n != def {
			out = append(out, n)
		}
	}
	return out
}

// isolationFor validates a create's isolation: "" is the server's default,
// so that a record always names the isolation it has.
func (m *Manager) isolationFor(name string) (string, error) {
	if name == "" {
		return m.backend().Name(), nil
	}
	if err := sandbox.CheckIsolation(name); err != nil {
		return "", err
	}
	if !slices.Contains(m.offered(), name) {
		return "", sandbox.Errorf(sandbox.KindNotSupported, "isolation %q is not available on this server, which runs %s", name, strings.Join(m.offered(), ", "))
	}
	return name, nil
}

// withIsolation is rec's spec naming its isolation: a record from before
// specs had one names it in its Backend only, and the backend must see it
// (the server's default may have changed since).
func withIsolation(rec *sandbox.Record) sandbox.Spec {
	spec := rec.Spec
	if spec.Isolation == "" {
		spec.Isolation = rec.Backend
	}
	return spec
}

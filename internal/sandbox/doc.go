// Package sandbox is the domain of withruntime: what a sandbox is (Spec,
// Record, State, EndReason), the Backend seam that isolation backends
// implement, and the error kinds every layer shares.
//
// It must not import any other package of this module but internal/envname
// (the rule for environment names, which the wire shares): everything else
// depends on it, never the reverse.
package sandbox

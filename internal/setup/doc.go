// Package setup prepares a host for withruntime: the Debian packages it
// needs, runsc built statically from the gVisor version pinned in go.mod,
// the sandbox agent and the default image, all in the shared cache
// directory. Every step checks what is there first, so a second run only
// reuses.
//
// It must not import the server, the manager or the API.
package setup

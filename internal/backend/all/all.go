// Package all registers every backend built into withruntime: importing it
// is how a program runs sandboxes of each, while the server names none
// (it chooses among sandbox.Registrations).
package all

import (
	_ "github.com/withruntime/withruntime/internal/backend/gvisor"  // registers "gvisor"
	_ "github.com/withruntime/withruntime/internal/backend/microvm" // registers "microvm"
)

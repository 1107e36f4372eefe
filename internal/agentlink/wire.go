package agentlink

import "errors"

// The bytes the host and the agent exchange before a connection is used.
const (
	opHTTP       byte = 'H' // the host sends HTTP/1.1 requests on this connection
	opSuspend    byte = 'S' // the agent must let go of every connection
	ackSuspended byte = 'K' // the agent holds nothing on the host any more
)

// SockName is the name of the host's listening socket in the directory the
// sandbox sees (gVisor backend).
const SockName = "agent.sock"

// ResumeName is the file whose presence tells a suspended agent that the
// sandbox was restored and it may dial again (gVisor backend).
const ResumeName = "resume"

// ErrClosed is returned by a Host that was closed: the sandbox is gone or
// paused.
var ErrClosed = errors.New("agent link closed")

// OOMMark starts the console line a microVM's agent prints before it
// powers the guest off for memory (its memory file systems hold it all):
// the host reads the line as the end reason out_of_memory.
const OOMMark = "withruntime: out of memory"

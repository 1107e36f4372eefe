// Package agentlink is the contract between the host and the agent inside a
// sandbox: how they connect, how the host sends requests, the
// suspend/resume handshake around a checkpoint, and the health check.
//
// The agent dials and the host listens. The host never opens a path, a
// socket or an address that a sandbox names: it accepts connections on a
// listener of its own, in a place the sandbox can reach but not change (for
// gVisor a Unix socket in a directory bind-mounted read-only, reached with
// runsc's --host-uds=open; for a microVM, its one virtio-serial port, over
// which yamux makes each of the agent's dials a stream: ServePort, port.go).
// Whatever arrives there comes from that one sandbox, so a sandbox can at
// worst lie about itself.
//
// The wire, per connection the agent opens:
//
//	agent                      host
//	connect ---------------->  accept, queue as a spare (at most maxSpares)
//	                   <-----  'H' when the host takes it for requests:
//	HTTP/1.1 server    <---->  HTTP/1.1 client (keep-alive, one at a time)
//	                   <-----  or 'S': suspend
//	close every other
//	connection, 'K', close --> the agent holds nothing on the host: checkpoint
//
// After 'K' the agent dials nothing until the backend's resume signal
// (for gVisor: a file the host creates in the read-only directory). The
// agent keeps a few spares open, so a request never waits for a dial. The
// host bounds everything it reads: a spare that speaks first is dropped,
// the suspend answer is one byte within the caller's deadline, and callers
// bound the HTTP answers (see internal/manager's transport).
//
// It imports only the standard library, x/sys, yamux (a microVM's one
// port), x/time/rate (the guest's pings) and internal/backoff: the agent
// ships it into every sandbox.
package agentlink

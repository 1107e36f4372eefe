// Package gvisor is the gVisor isolation backend: every sandbox is a runsc
// sandbox (systrap platform, gVisor's own network stack) with a read-only
// base image under a size-capped copy-on-write layer, its own network
// namespace and cgroup limits that follow its size. The host reaches the
// in-sandbox agent over a Unix socket the agent creates in a host
// directory bind-mounted into the sandbox, so the channel does not depend
// on the sandbox's network.
//
// It registers itself as "gvisor". It must not import the manager or the
// API.
package gvisor

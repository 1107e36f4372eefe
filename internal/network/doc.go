// Package network makes and removes the host-side network plumbing of a
// sandbox: its own network namespace, the veth pair that is its only link,
// and the packet rules that send everything it transmits to the host's
// egress proxy (TCP) or resolver (DNS) and drop the rest.
//
// The rules live in one nftables table per server, "withruntime_<Name>"
// (inet family), and match the host ends of this server's veths by name,
// "w<Name>*". A sandbox is offline until SetOnline says otherwise: its
// host end's interface group is what the rules test, so the state lives
// and dies with the interface and survives Install.
//
// A server makes one Plumbing (New) and gives it to every backend it runs
// (sandbox.EgressWiring's Net): each installs it when made (Join) and
// uninstalls it when closed with no sandbox live, and the table goes with
// the last of them.
// Nothing here is kept per process.
//
// It must not import the rest of the platform (only internal/undo, which
// imports nothing of it); it only knows paths and names.
package network

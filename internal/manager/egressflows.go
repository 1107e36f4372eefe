package manager

// closeFlows closes the proxied connections of a sandbox that stopped
// running without ending (paused, or paused again after a resume that
// could not be recorded): a paused sandbox is not counted against its
// account's concurrency, so without this, creating, flooding and pausing
// sandboxes would pile up connections and the host's descriptors until
// their idle timeout. Only the connections go: what egress remembers of
// the sandbox (its log, the addresses handed to it, its DNS budgets)
// stays for its resume, and is released when it ends. The caller holds
// e.mu and has released the entry, so that its address no longer leads
// to it. EgressState implementations without CloseFlows close nothing.
func (m *Manager) closeFlows(id string) {
	if c, ok := m.cfg.EgressState.(interface{ CloseFlows(id string) }); ok {
		c.CloseFlows(id)
	}
}

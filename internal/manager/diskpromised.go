package manager

// DiskPromised is the bytes of the data dir's free space that admission
// counts the live (starting and running) sandboxes' disk quotas as
// holding: their sum over the overcommit ratio, as admit weighs them.
// Other writers of that file system (the template library's layers,
// internal/templates) leave it free, so that they never take the disk
// admission handed out.
func (m *Manager) DiskPromised() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var mib int64
	for _, o := range m.live {
		mib += int64(o.diskMiB)
	}
	return int64(float64(mib<<20) / m.cfg.Overcommit)
}

package admission

// Stats is what a Listener holds at one moment, read at once: for tests
// and diagnostics, which must not reach into its lock.
type Stats struct {
	// Max is its MaxConns; Open the connections admitted and not yet
	// closed.
	Max, Open int
	// Waiting is how many of them may be evicted, and Reading how many of
	// those are still sending a request's line and headers (or are idle
	// between requests); the others are keyless requests in their handler.
	Waiting, Reading int
	// Spared is how many connections are spared for a request in
	// progress, ByAccount the same by account.
	Spared    int
	ByAccount map[string]int
}

// Stats returns what l holds now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Max: l.max, Open: l.open, Waiting: l.waiting.Len(), Spared: l.spared, ByAccount: make(map[string]int, len(l.byAccount))}
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		if e.Value.(*conn).reading.Load() {
			s.Reading++
		}
	}
	for a, n := range l.byAccount {
		s.ByAccount[a] = n
	}
	return s
}

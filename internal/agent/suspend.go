package agent

import "sync"

// suspending is set while the host suspends the link (for a pause or a
// snapshot) and until it is resumed: the handlers that last as long as
// their connection (a foreground command's stream, a follow) let go at
// once instead of holding the suspend up, and what they ran goes on: a
// foreground command is kept in the process table, where the host follows
// it again from the bytes it had (GET /processes/{pid}/stream with
// offsets) once the link is back.
type suspending struct {
	mu sync.Mutex
	ch chan struct{} // closed while suspended
}

// wait is closed once a suspend starts (at once while one is under way).
func (s *suspending) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *suspending) set() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	select {
	case <-s.ch:
	default:
		close(s.ch)
	}
}

func (s *suspending) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.ch:
		s.ch = nil
	default:
	}
}

// Suspending tells the server that the host is suspending the link: the
// foreground commands and follows in progress let go of their streams,
// the commands going on (agentlink.Agent.Suspending).
func (s *Server) Suspending() { s.suspend.set() }

// Resumed tells the server that the link is back (agentlink.Agent.Resumed).
func (s *Server) Resumed() { s.suspend.clear() }

package server

// supervise is what Start does once the server exists: the open files
// limit goes to the hard limit (every proxied connection holds two
// descriptors), and a failed egress service ends Wait with its error
// instead of leaving the server half alive.
func (s *Server) supervise() {
	raiseFileLimit(s.cfg.Logger)
	s.superviseEgress()
}

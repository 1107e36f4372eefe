package server

// supervise is what Start does once the server exists: a failed egress
// service ends Wait with its error instead of leaving the server half
// alive.
func (s *Server) supervise() {
	s.superviseEgress()
}

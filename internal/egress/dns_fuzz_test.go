package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzDNSQuery hands arbitrary bytes to the DNS server as a query from a
// sandbox. Beyond not panicking: an answer is a well-formed response to
// that query (same ID, its question echoed as dnsmessage parses it); a
// query with several questions, a name over 253 bytes or a label over 63
// is REFUSED; and a query parsed and built again by dnsmessage gets the
// same answer as the bytes it came from.
func FuzzDNSQuery(f *testing.F) {
	for _, q := range []struct {
		name string
		typ  dnsmessage.Type
	}{
		{"api.test.", dnsmessage.TypeA},
		{"API.Test.", dnsmessage.TypeAAAA},
		{"evil.test.", dnsmessage.TypeA},
		{"nowhere.test.", dnsmessage.TypeA},
		{"api.test.", dnsmessage.TypeTXT},
		{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + ".test.", dnsmessage.TypeA},
		{strings.Repeat("a.", 127), dnsmessage.TypeA},
		{"a_b.test.", dnsmessage.TypeA},
	} {
		f.Add(buildQuery(f, 7, q.name, q.typ, 1))
	}
	f.Add(buildQuery(f, 8, "api.test.", dnsmessage.TypeA, 2))
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}) // a name pointing at itself
	hosts, err := ParseHosts(strings.NewReader("198.18.0.9 api.test a.wild.test\n198.18.0.10 api.test\n"))
	if err != nil {
		f.Fatal(err)
	}
	p, err := NewProxy(Config{
		Directory:   &directory{sb: Sandbox{ID: sandboxID, Policy: Policy{Internet: true, Allow: []string{"api.test", "*.wild.test", "nowhere.test", "a_b.test"}}}, ok: true},
		OriginalDst: func(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, nil },
		Hosts:       hosts,
		Lookup: func(ctx context.Context, name string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true} // never the network
		},
		DNSNamesPerMinute:   1 << 30,
		DNSQueriesPerSecond: 1 << 30, // the limits have their own tests
	})
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, query []byte) {
		resp := p.answer(ctx, sandboxAddr, query)
		var qp dnsmessage.Parser
		qh, err := qp.Start(query)
		if err != nil || qh.Response {
			if resp != nil {
				t.Fatalf("%x: answered %x, want nothing for what is not a query", query, resp)
			}
			return
		}
		if resp == nil {
			t.Fatalf("%x: no answer to a query", query)
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("answer %x does not parse: %v", resp, err)
		}
		if m.ID != qh.ID || !m.Response {
			t.Fatalf("answer has ID %d response %v, want ID %d response", m.ID, m.Response, qh.ID)
		}
		qs, qerr := qp.AllQuestions()
		if qerr != nil || len(qs) != 1 {
			if m.RCode != dnsmessage.RCodeRefused || len(m.Answers) != 0 {
				t.Fatalf("%d questions (%v): rcode %v, %d answers; want REFUSED", len(qs), qerr, m.RCode, len(m.Answers))
			}
			return
		}
		q := qs[0]
		if len(m.Questions) != 1 || m.Questions[0] != q {
			t.Fatalf("answer's questions %v, want %v", m.Questions, q)
		}
		name := normalize(q.Name.String())
		if tooLong(name) && m.RCode != dnsmessage.RCodeRefused {
			t.Fatalf("name of %d bytes answered %v, want REFUSED", len(name), m.RCode)
		}
		if len(m.Answers) > maxAnswers {
			t.Fatalf("%d answers, more than %d", len(m.Answers), maxAnswers)
		}
		for _, a := range m.Answers {
			if a.Header.Name != q.Name || a.Header.Type != dnsmessage.TypeA || q.Type != dnsmessage.TypeA || m.RCode != dnsmessage.RCodeSuccess {
				t.Fatalf("answer %v to %v (rcode %v)", a.Header, q, m.RCode)
			}
		}
		if m.RCode == dnsmessage.RCodeSuccess && !(Policy{Internet: true, Allow: []string{"api.test", "*.wild.test", "nowhere.test", "a_b.test"}}).Allows(name) {
			t.Fatalf("%q answered, but the policy does not allow it", name)
		}
		// The same query, as dnsmessage encodes it, gets the same answer.
		requery, err := encodeQuery(qh.ID, q.Name.String(), q.Type, 1, func(h *dnsmessage.Header) {
			h.OpCode, h.RecursionDesired = qh.OpCode, qh.RecursionDesired
		}, q.Class)
		if err != nil {
			return // a name only the wire form can hold: a label with a dot
		}
		again := p.answer(ctx, sandboxAddr, requery)
		var m2 dnsmessage.Message
		if err := m2.Unpack(again); err != nil {
			t.Fatalf("re-encoded query: answer does not parse: %v", err)
		}
		if m2.RCode != m.RCode || len(m2.Answers) != len(m.Answers) || len(m2.Questions) != 1 || m2.Questions[0] != q {
			t.Fatalf("re-encoded query: got %v %v, want %v %v", m2.RCode, m2.Questions, m.RCode, m.Questions)
		}
	})
}

// tooLong reports whether a normalized name is over DNS's limits.
func tooLong(name string) bool {
	if len(name) > 253 {
		return true
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) > 63 {
			return true
		}
	}
	return false
}

func buildQuery(t testing.TB, id uint16, name string, typ dnsmessage.Type, n int) []byte {
	t.Helper()
	msg, err := encodeQuery(id, name, typ, n)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// encodeQuery is a query for name (fully qualified) and typ, asked n times
// in one message; opts may set the header and the class.
func encodeQuery(id uint16, name string, typ dnsmessage.Type, n int, opts ...any) ([]byte, error) {
	h := dnsmessage.Header{ID: id, RecursionDesired: true}
	class := dnsmessage.ClassINET
	for _, o := range opts {
		switch o := o.(type) {
		case func(*dnsmessage.Header):
			o(&h)
		case dnsmessage.Class:
			class = o
		}
	}
	qn, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, h)
	b.StartQuestions()
	for range n {
		if err := b.Question(dnsmessage.Question{Name: qn, Type: typ, Class: class}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

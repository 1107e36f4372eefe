package accounts

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// TrialOffered refuses (forbidden) when trial accounts are not handed out.
func (s *Service) TrialOffered() error {
	if !s.cfg.Trial.Enabled {
		return sandbox.Errorf(sandbox.KindForbidden, "this server does not offer trial accounts")
	}
	return nil
}

// TrialGrant is a trial account just made, with the secret of its full key.
type TrialGrant struct {
	Account store.Account
	Secret  string
}

// Trial makes a trial account and a full key of it, for anyone at addr
// (ClientAddr), as often as the limits allow: the address's and the whole
// server's per window (rate_limited, with how long until the next in
// retryAfter), and the trial hours outstanding (capacity_exhausted).
func (s *Service) Trial(ctx context.Context, addr string) (g TrialGrant, retryAfter time.Duration, err error) {
	if err := s.TrialOffered(); err != nil {
		return g, 0, err
	}
	if wait, err := s.trials.allow(addr, time.Now()); err != nil {
		return g, wait, err
	}
	seconds, err := trialSeconds(s.cfg.Trial.Hours)
	if err != nil {
		return g, 0, err
	}
	s.trialMu.Lock()
	defer s.trialMu.Unlock()
	if err := s.checkOutstanding(ctx, seconds); err != nil {
		return g, 0, err
	}
	id := "trial-" + randHex(8)
	a := store.Account{ID: id, Name: id, CreatedAt: time.Now().UTC(), TrialSeconds: seconds, Concurrency: s.cfg.Trial.Concurrency}
	// The account first: a key whose account is missing would run without
	// the trial's bound.
	if err := s.cfg.Store.CreateAccount(ctx, a); err != nil {
		return g, 0, err
	}
	secret, k := NewKey(id, store.KeyFull)
	k.Name = "trial"
	if err := s.cfg.Store.PutKey(ctx, k); err != nil {
		return g, 0, err
	}
	return TrialGrant{Account: a, Secret: secret}, 0, nil
}

// trialOutstandingFor is how long a trial account's unused hours count as
// outstanding: a trial abandoned with its hours unused stops holding back
// new ones after it.
const trialOutstandingFor = 30 * 24 * time.Hour

// checkOutstanding refuses a trial of seconds more when, with it, the
// trial accounts made in the last trialOutstandingFor would hold more
// than the server's outstanding hours unused. Every API server of a
// store reads the same accounts and ledger; trialMu keeps this one's
// grants from passing the bound together.
func (s *Service) checkOutstanding(ctx context.Context, seconds int64) error {
	accounts, err := s.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	since := time.Now().Add(-trialOutstandingFor)
	recent := accounts[:0:0]
	for _, a := range accounts {
		if a.TrialSeconds > 0 && a.CreatedAt.After(since) {
			recent = append(recent, a)
		}
	}
	used, err := s.TrialUsedMs(ctx, recent)
	if err != nil {
		return err
	}
	outstanding := seconds * 1000
	for _, a := range recent {
		outstanding += max(a.TrialSeconds*1000-used[a.ID], 0)
	}
	if limit := int64(s.cfg.Trial.OutstandingHours * 3.6e6); outstanding > limit {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"this server's trial accounts hold all the free hours it offers (%g): try again later", s.cfg.Trial.OutstandingHours)
	}
	return nil
}

// SizeRequest is the size a create asks for: zero fields, and a nil
// DiskGiB, are left to the server's default.
type SizeRequest struct {
	VCPUs, MemoryMiB int
	DiskGiB          *int
}

// CutToTrial bounds what a create of account asks for when account is a
// trial account: every size field within the trial's MaxSize (forbidden
// past it), and a field left to the server's default cut to the trial's.
// Other accounts' requests pass as they are.
func (s *Service) CutToTrial(ctx context.Context, account string, req *SizeRequest) error {
	a, err := s.cfg.Store.GetAccount(ctx, account)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return nil
	}
	if err != nil || a.TrialSeconds <= 0 {
		return err
	}
	most, def := s.cfg.Trial.MaxSize, s.cfg.DefaultSize
	if req.VCPUs > most.VCPUs || req.MemoryMiB > most.MemoryMiB || req.DiskGiB != nil && *req.DiskGiB > most.DiskGiB {
		return sandbox.Errorf(sandbox.KindForbidden,
			"a trial account's sandboxes have at most %d vCPUs, %d MiB of memory and %d GiB of disk: ask for no more",
			most.VCPUs, most.MemoryMiB, most.DiskGiB)
	}
	if req.VCPUs == 0 && def.VCPUs > most.VCPUs {
		req.VCPUs = most.VCPUs
	}
	if req.MemoryMiB == 0 && def.MemoryMiB > most.MemoryMiB {
		req.MemoryMiB = most.MemoryMiB
	}
	if req.DiskGiB == nil && def.DiskGiB > most.DiskGiB {
		d := most.DiskGiB
		req.DiskGiB = &d
	}
	if a.Concurrency == 0 {
		// A trial made before trials had their own concurrency: it gets
		// it now, before the manager admits this create.
		a.Concurrency = s.cfg.Trial.Concurrency
		return s.cfg.Store.PutAccount(ctx, *a)
	}
	return nil
}

// ClientAddr is who a trial request from the peer at remoteAddr (host and
// port) counts against: the host, and for IPv6 its /64, which one client
// usually holds whole. A proxy in front of the server makes every client
// one address; its forwarding headers are not trusted, as anyone can send
// them.
func ClientAddr(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}

// maxTrialAddresses bounds the limiter's memory: past it, addresses not
// seen before are refused until windows pass.
const maxTrialAddresses = 1 << 16

// trialLimiter allows each address perAddr trial accounts per fixed
// window, and every address together perAll, in memory: a restart
// forgets the counts, and each API server of a store counts its own.
type trialLimiter struct {
	perAddr, perAll int
	window          time.Duration

	mu    sync.Mutex // guards seen, all and swept
	seen  map[string]trialWindow
	all   trialWindow
	swept time.Time // when seen was last rid of passed windows
}

// trialWindow is one address's window (or the server's): when it began,
// and how many trial accounts it has had.
type trialWindow struct {
	start time.Time
	n     int
}

func newTrialLimiter(perAddr, perAll int, window time.Duration) *trialLimiter {
	return &trialLimiter{perAddr: perAddr, perAll: perAll, window: window, seen: map[string]trialWindow{}}
}

// allow counts one trial account for addr at now, or says how long until
// addr may have another, and why not now (rate_limited).
func (l *trialLimiter) allow(addr string, now time.Time) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	full := len(l.seen) >= maxTrialAddresses
	if now.Sub(l.swept) >= l.window || full && now.Sub(l.swept) >= time.Second {
		for a, w := range l.seen {
			if now.Sub(w.start) >= l.window {
				delete(l.seen, a)
			}
		}
		l.swept = now
	}
	w, ok := l.seen[addr]
	if !ok && len(l.seen) >= maxTrialAddresses {
		return l.window, tooManyTrials("from this address")
	}
	if !ok || now.Sub(w.start) >= l.window {
		w = trialWindow{start: now}
	}
	if w.n >= l.perAddr {
		return w.start.Add(l.window).Sub(now), tooManyTrials("from this address")
	}
	if now.Sub(l.all.start) >= l.window {
		l.all = trialWindow{start: now}
	}
	if l.all.n >= l.perAll {
		return l.all.start.Add(l.window).Sub(now), tooManyTrials("on this server")
	}
	l.all.n++
	w.n++
	l.seen[addr] = w
	return 0, nil
}

// tooManyTrials is the refusal of a trial past a window's count where.
func tooManyTrials(where string) error {
	return sandbox.Errorf(sandbox.KindRateLimited, "too many trial accounts %s: try again later", where)
}

package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// trial makes a trial account and a full key of it, for anyone, as often
// as the limits allow: the client address's and the whole server's per
// window (rate_limited), and the trial hours outstanding
// (capacity_exhausted).
func (s *server) trial(w http.ResponseWriter, r *http.Request, _ caller) error {
	if !s.cfg.Trial.Enabled {
		return sandbox.Errorf(sandbox.KindForbidden, "this server does not offer trial accounts")
	}
	var req struct{}
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	if wait, err := s.trials.allow(clientAddr(r), time.Now()); err != nil {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		return err
	}
	seconds, err := trialSeconds(s.cfg.Trial.Hours)
	if err != nil {
		return err
	}
	s.trialMu.Lock()
	defer s.trialMu.Unlock()
	if err := s.checkOutstanding(r.Context(), seconds); err != nil {
		return err
	}
	id := "trial-" + randHex(8)
	a := store.Account{ID: id, Name: id, CreatedAt: time.Now().UTC(), TrialSeconds: seconds, Concurrency: s.cfg.Trial.Concurrency}
	// The account first: a key whose account is missing would run without
	// the trial's bound.
	if err := s.cfg.Store.CreateAccount(r.Context(), a); err != nil {
		return err
	}
	secret, k := newKey(id, store.KeyFull)
	k.Name = "trial"
	if err := s.cfg.Store.PutKey(r.Context(), k); err != nil {
		return err
	}
	infoFrom(r.Context()).account = id
	writeJSON(w, http.StatusCreated, api.Trial{Account: id, Key: secret, TrialHours: float64(seconds) / 3600})
	return nil
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
func (s *server) checkOutstanding(ctx context.Context, seconds int64) error {
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
	used, err := s.trialUsedMs(ctx, recent)
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

// trialSize bounds what a trial account's create asks for: every size
// field within the trial's MaxSize (forbidden past it), and a field left
// to the server's default cut to the trial's. Other accounts' requests
// pass as they are.
func (s *server) trialSize(ctx context.Context, c caller, req *api.CreateSandboxRequest) error {
	a, err := s.cfg.Store.GetAccount(ctx, c.account)
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

// Size is a sandbox's size as a create asks for it.
type Size struct {
	VCPUs, MemoryMiB, DiskGiB int
}

// DefaultSize is the manager's default size, and DefaultTrialSize the
// most a trial account's sandbox may have: the product's snippets
// (`Sandbox.create()` with no size) run on a trial.
var (
	DefaultSize      = Size{VCPUs: 2, MemoryMiB: 4096, DiskGiB: 10}
	DefaultTrialSize = DefaultSize
)

// Defaults of TrialConfig's bounds: the server hands out at most
// DefaultTrialPerWindow trials per window and none while trials hold
// DefaultTrialOutstandingHours unused; each runs at most
// DefaultTrialConcurrency sandboxes and makes at most DefaultTrialMaxKeys
// keys besides its own.
const (
	DefaultTrialPerWindow        = 20
	DefaultTrialOutstandingHours = 1000
	DefaultTrialConcurrency      = 3
	DefaultTrialMaxKeys          = 2
)

// or is z with its zero fields taken from d.
func (z Size) or(d Size) Size {
	return Size{VCPUs: cmp.Or(z.VCPUs, d.VCPUs), MemoryMiB: cmp.Or(z.MemoryMiB, d.MemoryMiB), DiskGiB: cmp.Or(z.DiskGiB, d.DiskGiB)}
}

func (t *TrialConfig) setDefaults() {
	t.Hours = cmp.Or(t.Hours, DefaultTrialHours)
	t.PerAddress = cmp.Or(t.PerAddress, DefaultTrialPerAddress)
	t.Window = cmp.Or(t.Window, DefaultTrialWindow)
	t.PerWindow = cmp.Or(t.PerWindow, DefaultTrialPerWindow)
	t.OutstandingHours = cmp.Or(t.OutstandingHours, DefaultTrialOutstandingHours)
	t.MaxSize = t.MaxSize.or(DefaultTrialSize)
	t.Concurrency = cmp.Or(t.Concurrency, DefaultTrialConcurrency)
	t.MaxKeys = cmp.Or(t.MaxKeys, DefaultTrialMaxKeys)
}

// Validate reports bounds of t that are wrong, or that would refuse every
// trial offered (outstanding hours below one trial's).
func (t TrialConfig) Validate() error {
	switch {
	case !(t.Hours >= 0 && t.Hours <= maxTrialHours):
		return fmt.Errorf("httpapi: Trial.Hours must be 0 to %d", maxTrialHours)
	case !(t.OutstandingHours >= 0 && t.OutstandingHours <= maxTrialHours*1000):
		return fmt.Errorf("httpapi: Trial.OutstandingHours must be 0 to %d", maxTrialHours*1000)
	case t.PerAddress < 0 || t.Window < 0 || t.PerWindow < 0 || t.Concurrency < 0 || t.MaxKeys < 0 ||
		t.MaxSize.VCPUs < 0 || t.MaxSize.MemoryMiB < 0 || t.MaxSize.DiskGiB < 0:
		return fmt.Errorf("httpapi: the trial's bounds must not be negative")
	case t.Concurrency > MaxAccountConcurrency:
		return fmt.Errorf("httpapi: Trial.Concurrency must be at most %d", MaxAccountConcurrency)
	}
	t.setDefaults()
	if t.Enabled && t.OutstandingHours < t.Hours {
		return fmt.Errorf("httpapi: Trial.OutstandingHours (%g) is below one trial's hours (%g): no trial could be made", t.OutstandingHours, t.Hours)
	}
	return nil
}

// clientAddr is who a trial request counts against: the host of the peer's
// address, and for IPv6 its /64, which one client usually holds whole. A
// proxy in front of the server makes every client one address; its
// forwarding headers are not trusted, as anyone can send them.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
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

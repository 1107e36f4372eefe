package httpapi

import (
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
// as the per-address limit allows.
func (s *server) trial(w http.ResponseWriter, r *http.Request, _ caller) error {
	if !s.cfg.Trial.Enabled {
		return sandbox.Errorf(sandbox.KindForbidden, "this server does not offer trial accounts")
	}
	var req struct{}
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, true, &req); err != nil {
		return err
	}
	if wait, ok := s.trials.allow(clientAddr(r), time.Now()); !ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		return sandbox.Errorf(sandbox.KindRateLimited, "too many trial accounts from this address: try again later")
	}
	seconds, err := trialSeconds(s.cfg.Trial.Hours)
	if err != nil {
		return err
	}
	id := "trial-" + randHex(8)
	a := store.Account{ID: id, Name: id, CreatedAt: time.Now().UTC(), TrialSeconds: seconds}
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
// window, in memory: a restart forgets the counts.
type trialLimiter struct {
	perAddr int
	window  time.Duration

	mu    sync.Mutex // guards seen and swept
	seen  map[string]trialWindow
	swept time.Time // when seen was last rid of passed windows
}

// trialWindow is one address's window: when it began, and how many trial
// accounts it has had.
type trialWindow struct {
	start time.Time
	n     int
}

func newTrialLimiter(perAddr int, window time.Duration) *trialLimiter {
	return &trialLimiter{perAddr: perAddr, window: window, seen: map[string]trialWindow{}}
}

// allow counts one trial account for addr at now, or says how long until
// addr may have another.
func (l *trialLimiter) allow(addr string, now time.Time) (time.Duration, bool) {
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
		return l.window, false
	}
	if !ok || now.Sub(w.start) >= l.window {
		w = trialWindow{start: now}
	}
	if w.n >= l.perAddr {
		return w.start.Add(l.window).Sub(now), false
	}
	w.n++
	l.seen[addr] = w
	return 0, true
}

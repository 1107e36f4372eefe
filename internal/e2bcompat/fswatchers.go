package e2bcompat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/client"
)

// Bounds of directory watches, in number and in the bytes their snapshots
// count for: per sandbox, per account and on the whole server. The last
// quarter of the server's room is kept for accounts with few watches, so
// that some tenants filling it do not shut the others out.
const (
	maxWatchesPerSandbox = 16
	maxWatchesPerAccount = 64
	maxWatches           = 1024
	maxSnapshotBytes     = 4 << 20
	maxAccountWatchBytes = 16 << 20
	maxWatchBytes        = 128 << 20
	// A polled watcher nobody asked for events for this long is dropped;
	// sweepEvery is how often that, and whether its sandbox still runs,
	// is checked.
	watcherIdle = 2 * time.Minute
	sweepEvery  = 30 * time.Second
)

var (
	errTooManyWatches = connect.NewError(connect.CodeResourceExhausted,
		errors.New("too many directory watches: remove a watcher or close a watch first"))
	errWatchTooLarge = connect.NewError(connect.CodeResourceExhausted,
		errors.New("the directory has too many entries to watch: watch a smaller one"))
	errWatchBytes = connect.NewError(connect.CodeResourceExhausted,
		errors.New("the directory watches hold too much: remove a watcher or watch smaller directories"))
)

// watcher is a polled watch: the snapshot events are computed against.
type watcher struct {
	dir       string
	recursive bool
	withEntry bool
	user      string
	sb        *Sandbox // the one it was made by: its sandbox and key

	mu   sync.Mutex // held by GetWatcherEvents
	snap snapshot

	// Under watchers.mu.
	used  time.Time
	bytes int64
}

// usage is what one account or sandbox holds.
type usage struct {
	n     int
	bytes int64
}

// watchers holds the polled watchers by sandbox and id, and counts them
// and the streams (WatchDir) that run within the bounds above.
type watchers struct {
	mu    sync.Mutex
	byBox map[string]map[string]*watcher
	box   map[string]*usage // watchers and streams, by sandbox
	acct  map[string]*usage // by account
	all   usage
	now   func() time.Time
	sweep *time.Timer // armed while there are watchers
	// alive says whether a watcher's sandbox still runs for its key.
	alive func(w *watcher) bool
}

func newWatchers() *watchers {
	return &watchers{byBox: map[string]map[string]*watcher{}, box: map[string]*usage{}, acct: map[string]*usage{},
		now: time.Now, alive: sandboxAlive}
}

// room says whether acct may add a watch of bytes to sandbox box. Under
// ws.mu.
func (ws *watchers) room(acct, box string, bytes int64) error {
	a, b := ws.acct[acct], ws.box[box]
	if a == nil {
		a = &usage{}
	}
	if b == nil {
		b = &usage{}
	}
	few := a.n < maxWatchesPerAccount/4 && a.bytes < maxAccountWatchBytes/4
	switch {
	case b.n >= maxWatchesPerSandbox, a.n >= maxWatchesPerAccount, ws.all.n >= maxWatches,
		ws.all.n >= maxWatches*3/4 && !few:
		return errTooManyWatches
	case a.bytes+bytes > maxAccountWatchBytes, ws.all.bytes+bytes > maxWatchBytes,
		ws.all.bytes+bytes > maxWatchBytes*3/4 && !few:
		return errWatchBytes
	}
	return nil
}

// count adds n watches and bytes to acct's and box's usage. Under ws.mu.
func (ws *watchers) count(acct, box string, n int, bytes int64) {
	for _, m := range []struct {
		m   map[string]*usage
		key string
	}{{ws.acct, acct}, {ws.box, box}} {
		u := m.m[m.key]
		if u == nil {
			u = &usage{}
			m.m[m.key] = u
		}
		u.n += n
		u.bytes += bytes
		if u.n == 0 {
			delete(m.m, m.key)
		}
	}
	ws.all.n += n
	ws.all.bytes += bytes
}

// stream is a running WatchDir as counted.
type stream struct {
	ws        *watchers
	acct, box string
	bytes     int64
}

// hold counts a stream of sandbox box for acct until release.
func (ws *watchers) hold(acct, box string, bytes int64) (*stream, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if err := ws.room(acct, box, bytes); err != nil {
		return nil, err
	}
	ws.count(acct, box, 1, bytes)
	return &stream{ws: ws, acct: acct, box: box, bytes: bytes}, nil
}

// resize counts the stream's snapshot as bytes from now on, if it fits.
func (s *stream) resize(bytes int64) error {
	s.ws.mu.Lock()
	defer s.ws.mu.Unlock()
	if err := s.ws.fits(s.acct, bytes-s.bytes); err != nil {
		return err
	}
	s.ws.count(s.acct, s.box, 0, bytes-s.bytes)
	s.bytes = bytes
	return nil
}

func (s *stream) release() {
	s.ws.mu.Lock()
	defer s.ws.mu.Unlock()
	s.ws.count(s.acct, s.box, -1, -s.bytes)
}

// fits says whether acct's watches may grow by more bytes. Under ws.mu.
func (ws *watchers) fits(acct string, more int64) error {
	if more <= 0 {
		return nil
	}
	if a := ws.acct[acct]; a != nil && a.bytes+more > maxAccountWatchBytes || ws.all.bytes+more > maxWatchBytes {
		return errWatchBytes
	}
	return nil
}

// add keeps w, made by w.sb, and returns its id.
func (ws *watchers) add(w *watcher) (string, error) {
	var b [12]byte
	rand.Read(b[:])
	wid := hex.EncodeToString(b[:])
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if err := ws.room(w.sb.acct, w.sb.ID, w.snap.bytes); err != nil {
		return "", err
	}
	box := w.sb.ID
	if ws.byBox[box] == nil {
		ws.byBox[box] = map[string]*watcher{}
	}
	w.used, w.bytes = ws.now(), w.snap.bytes
	ws.byBox[box][wid] = w
	ws.count(w.sb.acct, box, 1, w.bytes)
	if ws.sweep == nil {
		ws.sweep = time.AfterFunc(sweepEvery, ws.sweepNow)
	}
	return wid, nil
}

func (ws *watchers) get(box, wid string) *watcher {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byBox[box][wid]
	if w != nil {
		w.used = ws.now()
	}
	return w
}

// resize counts w's snapshot as bytes from now on, if it fits.
func (ws *watchers) resize(w *watcher, bytes int64) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if err := ws.fits(w.sb.acct, bytes-w.bytes); err != nil {
		return err
	}
	ws.count(w.sb.acct, w.sb.ID, 0, bytes-w.bytes)
	w.bytes = bytes
	return nil
}

func (ws *watchers) remove(box, wid string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.drop(box, wid)
}

// drop forgets a watcher. Under ws.mu.
func (ws *watchers) drop(box, wid string) bool {
	w, ok := ws.byBox[box][wid]
	if !ok {
		return false
	}
	delete(ws.byBox[box], wid)
	if len(ws.byBox[box]) == 0 {
		delete(ws.byBox, box)
	}
	ws.count(w.sb.acct, box, -1, -w.bytes)
	return true
}

// sweepNow drops the watchers idle for watcherIdle and those whose
// sandbox no longer runs (or whose key no longer works), then arms the
// next sweep while any are left.
func (ws *watchers) sweepNow() {
	type held struct {
		box, wid string
		w        *watcher
	}
	var check []held
	ws.mu.Lock()
	now := ws.now()
	for box, m := range ws.byBox {
		for wid, w := range m {
			if now.Sub(w.used) > watcherIdle {
				ws.drop(box, wid)
				continue
			}
			check = append(check, held{box, wid, w})
		}
	}
	ws.mu.Unlock()
	// One question per sandbox and key, asked unlocked.
	seen := map[[2]string]bool{}
	for _, h := range check {
		k := [2]string{h.box, h.w.sb.key}
		alive, ok := seen[k]
		if !ok {
			alive = ws.alive(h.w)
			seen[k] = alive
		}
		if !alive {
			ws.remove(h.box, h.wid)
		}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.byBox) > 0 {
		ws.sweep.Reset(sweepEvery)
	} else {
		ws.sweep = nil
	}
}

// sandboxAlive says whether w's sandbox runs for w's key: a sandbox gone,
// ended or not running, or a key refused, is dead; an answer that says
// neither (the API busy) keeps the watcher.
func sandboxAlive(w *watcher) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := w.sb.C.GetSandbox(ctx, w.sb.ID)
	if err != nil {
		return !isNotFound(err) && !keyDead(err)
	}
	return info.State == "running"
}

// keyDead says whether err means a watcher's key or lease can never work
// again.
func keyDead(err error) bool {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.Code {
	case client.CodeLeaseEnded, client.CodeUnauthorized, client.CodeForbidden:
		return true
	}
	return false
}

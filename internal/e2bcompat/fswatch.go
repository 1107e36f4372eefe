package e2bcompat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
)

// Directory watching. withruntime's API has no change notifications, so a
// watch compares listings of the directory taken through the API: a
// stream every pollEvery, a polled watcher (CreateWatcher) at each
// GetWatcherEvents. Changes that come and go between two listings are not
// seen, a rename shows as a remove and a create.
const (
	pollEvery = time.Second
	// Watches at once: per sandbox, and on the whole server.
	maxWatchesPerSandbox = 16
	maxWatches           = 1024
	// A polled watcher nobody asked for events for this long is dropped.
	watcherIdle = 10 * time.Minute
	// Keepalive-Ping-Interval is honoured within these bounds.
	minKeepalive     = time.Second
	maxKeepalive     = 5 * time.Minute
	defaultKeepalive = 50 * time.Second
)

// snapshot is a directory's contents by name relative to it.
type snapshot map[string]api.FileInfo

func takeSnapshot(ctx context.Context, sb *Sandbox, dir string, recursive bool) (snapshot, error) {
	depth := 1
	if recursive {
		depth = maxDepth
	}
	infos, err := listTree(ctx, sb, dir, depth)
	if err != nil {
		return nil, err
	}
	snap := make(snapshot, len(infos))
	for _, fi := range infos {
		snap[strings.TrimPrefix(strings.TrimPrefix(fi.Path, dir), "/")] = fi
	}
	return snap, nil
}

// changes are the events that turn old into cur, by name.
func changes(old, cur snapshot, withEntry bool, user string) []*fspb.FilesystemEvent {
	var evs []*fspb.FilesystemEvent
	add := func(name string, t fspb.EventType, fi *api.FileInfo) {
		ev := &fspb.FilesystemEvent{Name: name, Type: t}
		if withEntry && fi != nil {
			ev.Entry = entryInfo(*fi, user)
		}
		evs = append(evs, ev)
	}
	for name, fi := range cur {
		prev, ok := old[name]
		switch {
		case !ok || prev.Type != fi.Type:
			add(name, fspb.EventType_EVENT_TYPE_CREATE, &fi)
		case prev.Size != fi.Size || !prev.ModTime.Equal(fi.ModTime) || prev.Target != fi.Target:
			add(name, fspb.EventType_EVENT_TYPE_WRITE, &fi)
		case prev.Mode != fi.Mode:
			add(name, fspb.EventType_EVENT_TYPE_CHMOD, &fi)
		}
	}
	for name := range old {
		if fi, ok := cur[name]; !ok || fi.Type != old[name].Type {
			add(name, fspb.EventType_EVENT_TYPE_REMOVE, nil)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		// Removes of a replaced entry before its create.
		if evs[i].Name == evs[j].Name {
			return evs[i].Type == fspb.EventType_EVENT_TYPE_REMOVE
		}
		return evs[i].Name < evs[j].Name
	})
	return evs
}

// keepaliveEvery is the interval a Keepalive-Ping-Interval header (seconds)
// asks for, bounded.
func keepaliveEvery(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Keepalive-Ping-Interval")))
	if err != nil || n <= 0 {
		return defaultKeepalive
	}
	d := time.Duration(n) * time.Second
	return min(max(d, minKeepalive), maxKeepalive)
}

// watchTarget resolves and checks the directory a watch request names.
func watchTarget(ctx context.Context, sb *Sandbox, p string) (string, error) {
	dir := resolvePath(sb.User, p)
	fi, err := statAs(ctx, sb, dir)
	if err != nil {
		return "", err
	}
	if fi.Type != api.FileTypeDir {
		return "", &Error{Status: http.StatusBadRequest, Message: dir + " is not a directory"}
	}
	return dir, nil
}

func (f *fsService) WatchDir(ctx context.Context, req *connect.Request[fspb.WatchDirRequest], stream *connect.ServerStream[fspb.WatchDirResponse]) error {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return err
	}
	dir, err := watchTarget(ctx, sb, req.Msg.Path)
	if err != nil {
		return connectError(err)
	}
	release, err := f.watchers.hold(sb.ID)
	if err != nil {
		return err
	}
	defer release()
	snap, err := takeSnapshot(ctx, sb, dir, req.Msg.Recursive)
	if err != nil {
		return connectError(err)
	}
	start := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}
	if err := stream.Send(start); err != nil {
		return err
	}
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	ka := time.NewTicker(keepaliveEvery(req.Header()))
	defer ka.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ka.C:
			msg := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}
			if err := stream.Send(msg); err != nil {
				return err
			}
		case <-poll.C:
			cur, err := takeSnapshot(ctx, sb, dir, req.Msg.Recursive)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return connectError(err)
			}
			for _, ev := range changes(snap, cur, req.Msg.IncludeEntry, sb.User) {
				msg := &fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: ev}}
				if err := stream.Send(msg); err != nil {
					return err
				}
			}
			snap = cur
		}
	}
}

func (f *fsService) CreateWatcher(ctx context.Context, req *connect.Request[fspb.CreateWatcherRequest]) (*connect.Response[fspb.CreateWatcherResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := watchTarget(ctx, sb, req.Msg.Path)
	if err != nil {
		return nil, connectError(err)
	}
	snap, err := takeSnapshot(ctx, sb, dir, req.Msg.Recursive)
	if err != nil {
		return nil, connectError(err)
	}
	w := &watcher{dir: dir, recursive: req.Msg.Recursive, withEntry: req.Msg.IncludeEntry, user: sb.User, snap: snap}
	id, err := f.watchers.add(sb.ID, w)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&fspb.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *fsService) GetWatcherEvents(ctx context.Context, req *connect.Request[fspb.GetWatcherEventsRequest]) (*connect.Response[fspb.GetWatcherEventsResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	w := f.watchers.get(sb.ID, req.Msg.WatcherId)
	if w == nil {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("watcher "+req.Msg.WatcherId+" not found"))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.user != sb.User {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("watcher "+req.Msg.WatcherId+" not found"))
	}
	cur, err := takeSnapshot(ctx, sb, w.dir, w.recursive)
	if err != nil {
		return nil, connectError(err)
	}
	evs := changes(w.snap, cur, w.withEntry, w.user)
	w.snap = cur
	return connect.NewResponse(&fspb.GetWatcherEventsResponse{Events: evs}), nil
}

func (f *fsService) RemoveWatcher(ctx context.Context, req *connect.Request[fspb.RemoveWatcherRequest]) (*connect.Response[fspb.RemoveWatcherResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	if !f.watchers.remove(sb.ID, req.Msg.WatcherId) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("watcher "+req.Msg.WatcherId+" not found"))
	}
	return connect.NewResponse(&fspb.RemoveWatcherResponse{}), nil
}

// watcher is a polled watch: the listing events are computed against.
type watcher struct {
	dir       string
	recursive bool
	withEntry bool
	user      string

	mu   sync.Mutex
	snap snapshot
	used time.Time // under watchers.mu
}

// watchers holds the polled watchers by sandbox and id, and counts the
// streams (WatchDir) that run, within the bounds above.
type watchers struct {
	mu      sync.Mutex
	byBox   map[string]map[string]*watcher
	streams map[string]int
	total   int
	now     func() time.Time
}

func newWatchers() *watchers {
	return &watchers{byBox: map[string]map[string]*watcher{}, streams: map[string]int{}, now: time.Now}
}

var errTooManyWatches = connect.NewError(connect.CodeResourceExhausted,
	errors.New("too many directory watches: remove a watcher or close a watch first"))

// room drops idle watchers, then says whether sandbox id may add a watch.
// Under w.mu.
func (ws *watchers) room(id string) bool {
	now := ws.now()
	for box, m := range ws.byBox {
		for wid, w := range m {
			if now.Sub(w.used) > watcherIdle {
				delete(m, wid)
				ws.total--
			}
		}
		if len(m) == 0 {
			delete(ws.byBox, box)
		}
	}
	return ws.total < maxWatches && len(ws.byBox[id])+ws.streams[id] < maxWatchesPerSandbox
}

// hold counts a stream for sandbox id until release is called.
func (ws *watchers) hold(id string) (release func(), err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.room(id) {
		return nil, errTooManyWatches
	}
	ws.streams[id]++
	ws.total++
	return func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if ws.streams[id]--; ws.streams[id] == 0 {
			delete(ws.streams, id)
		}
		ws.total--
	}, nil
}

func (ws *watchers) add(id string, w *watcher) (string, error) {
	var b [12]byte
	rand.Read(b[:])
	wid := hex.EncodeToString(b[:])
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.room(id) {
		return "", errTooManyWatches
	}
	if ws.byBox[id] == nil {
		ws.byBox[id] = map[string]*watcher{}
	}
	w.used = ws.now()
	ws.byBox[id][wid] = w
	ws.total++
	return wid, nil
}

func (ws *watchers) get(id, wid string) *watcher {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byBox[id][wid]
	if w != nil {
		w.used = ws.now()
	}
	return w
}

func (ws *watchers) remove(id, wid string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := ws.byBox[id][wid]; !ok {
		return false
	}
	delete(ws.byBox[id], wid)
	if len(ws.byBox[id]) == 0 {
		delete(ws.byBox, id)
	}
	ws.total--
	return true
}

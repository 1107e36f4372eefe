package e2bcompat

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
)

// Directory watching. withruntime's API has no change notifications, so a
// watch compares listings of the directory taken through the API: a
// stream every pollEvery, a polled watcher (CreateWatcher) at each
// GetWatcherEvents. Changes that come and go between two listings are not
// seen, a rename shows as a remove and a create, a new file as the events
// envd's inotify gives for an upload (create, chmod, and write unless it is
// empty). Between listings a watch keeps only a digest of each entry
// (snapshot), within byte bounds.
const (
	pollEvery = time.Second
	// Keepalive-Ping-Interval is honoured within these bounds.
	minKeepalive     = time.Second
	maxKeepalive     = 5 * time.Minute
	defaultKeepalive = 50 * time.Second
)

// entryState is what a watch keeps of an entry between listings: its
// type, its mode and a hash of what else a change shows in.
type entryState struct {
	typ  uint8
	mode uint32
	sum  uint64 // size, mtime, target (and an unknown type's name)
}

// entryCost is what a snapshot counts for an entry besides its name: the
// state and the map's own share.
const entryCost = 64

// snapshot is a directory's contents by name relative to it, as digests;
// bytes is what it is counted as.
type snapshot struct {
	m     map[string]entryState
	bytes int64
}

var typeCodes = map[string]uint8{api.FileTypeFile: 1, api.FileTypeDir: 2, api.FileTypeSymlink: 3}

func stateOf(fi api.FileInfo) entryState {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(fi.Size))
	binary.LittleEndian.PutUint64(b[8:], uint64(fi.ModTime.UnixNano()))
	h.Write(b[:])
	h.Write([]byte(fi.Target))
	code, ok := typeCodes[fi.Type]
	if !ok {
		h.Write([]byte{0})
		h.Write([]byte(fi.Type))
	}
	return entryState{typ: code, mode: uint32(fi.Mode), sum: h.Sum64()}
}

// listing is a directory's entries as listed, by name relative to it.
type listing struct {
	names []string
	infos []api.FileInfo
}

func (f *fsService) list(ctx context.Context, sb *Sandbox, dir string, recursive bool) (*listing, error) {
	depth := 1
	if recursive {
		depth = maxDepth
	}
	infos, err := f.listTree(ctx, sb, dir, depth)
	if err != nil {
		return nil, err
	}
	l := &listing{names: make([]string, len(infos)), infos: infos}
	for i, fi := range infos {
		l.names[i] = strings.TrimPrefix(strings.TrimPrefix(fi.Path, dir), "/")
	}
	return l, nil
}

// snapshot digests l, refusing one over maxSnapshotBytes.
func (l *listing) snapshot() (snapshot, error) {
	s := snapshot{m: make(map[string]entryState, len(l.names))}
	for i, name := range l.names {
		s.m[strings.Clone(name)] = stateOf(l.infos[i])
		s.bytes += int64(len(name)) + entryCost
	}
	if s.bytes > maxSnapshotBytes {
		return snapshot{}, errWatchTooLarge
	}
	return s, nil
}

// changes are the events that turn old into cur (l digested), by name.
func changes(old, cur snapshot, l *listing, withEntry bool, user string) []*fspb.FilesystemEvent {
	var evs []*fspb.FilesystemEvent
	add := func(name string, t fspb.EventType, fi *api.FileInfo) {
		ev := &fspb.FilesystemEvent{Name: name, Type: t}
		if withEntry && fi != nil {
			ev.Entry = entryInfo(*fi, user)
		}
		evs = append(evs, ev)
	}
	for i, name := range l.names {
		st, fi := cur.m[name], &l.infos[i]
		prev, ok := old.m[name]
		switch {
		case !ok || prev.typ != st.typ:
			add(name, fspb.EventType_EVENT_TYPE_CREATE, fi)
			if fi.Type == api.FileTypeFile {
				// A new file shows as envd shows an upload, event by
				// event: made, its mode set, then (not empty) written.
				add(name, fspb.EventType_EVENT_TYPE_CHMOD, fi)
				if fi.Size > 0 {
					add(name, fspb.EventType_EVENT_TYPE_WRITE, fi)
				}
			}
		case prev.sum != st.sum && fi.Type != api.FileTypeDir:
			// A directory's own times and size change with what it
			// holds, which has events of its own (inotify gives none
			// for the directory).
			add(name, fspb.EventType_EVENT_TYPE_WRITE, fi)
		case prev.mode != st.mode:
			add(name, fspb.EventType_EVENT_TYPE_CHMOD, fi)
		}
	}
	for name, prev := range old.m {
		if st, ok := cur.m[name]; !ok || st.typ != prev.typ {
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
	l, err := f.list(ctx, sb, dir, req.Msg.Recursive)
	if err != nil {
		return connectError(err)
	}
	snap, err := l.snapshot()
	if err != nil {
		return err
	}
	h, err := f.watchers.hold(sb.acct, sb.ID, snap.bytes)
	if err != nil {
		return err
	}
	defer h.release()
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
			l, err := f.list(ctx, sb, dir, req.Msg.Recursive)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return connectError(err)
			}
			cur, err := l.snapshot()
			if err == nil {
				err = h.resize(cur.bytes)
			}
			if err != nil {
				return err
			}
			for _, ev := range changes(snap, cur, l, req.Msg.IncludeEntry, sb.User) {
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
	l, err := f.list(ctx, sb, dir, req.Msg.Recursive)
	if err != nil {
		return nil, connectError(err)
	}
	snap, err := l.snapshot()
	if err != nil {
		return nil, err
	}
	w := &watcher{dir: dir, recursive: req.Msg.Recursive, withEntry: req.Msg.IncludeEntry, user: sb.User, sb: sb, snap: snap}
	id, err := f.watchers.add(w)
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
	l, err := f.list(ctx, sb, w.dir, w.recursive)
	if err != nil {
		if keyDead(err) {
			f.watchers.remove(sb.ID, req.Msg.WatcherId)
		}
		return nil, connectError(err)
	}
	cur, err := l.snapshot()
	if err == nil {
		err = f.watchers.resize(w, cur.bytes)
	}
	if err != nil {
		f.watchers.remove(sb.ID, req.Msg.WatcherId)
		return nil, err
	}
	evs := changes(w.snap, cur, l, w.withEntry, w.user)
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

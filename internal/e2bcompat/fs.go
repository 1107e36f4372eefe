package e2bcompat

import (
	"context"
	"errors"
	"net/http"
	"path"

	"connectrpc.com/connect"

	"github.com/withruntime/withruntime/api"
	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem/filesystemconnect"
)

// Bounds of the filesystem service: a request message, the entries one
// ListDir returns (all depths together), and its depth.
const (
	maxFSRequest = 1 << 20
	maxListed    = 10000
	maxDepth     = 32
	// maxListsPerAccount bounds the listings (ListDir, a watch's poll) one
	// account has in progress; the others wait.
	maxListsPerAccount = 2
)

func init() { envdRoutes = append(envdRoutes, registerFS) }

// noCompression removes Connect's gzip from a handler: a compressed
// request would be inflated whole just to learn it is over the message
// bound. E2B's clients send and ask for none.
var noCompression = connect.WithCompression("gzip", nil, nil)

func registerFS(s *Server, mux *http.ServeMux) {
	fsys := &fsService{s: s, watchers: newWatchers(), lists: newKeyLimiter(maxListsPerAccount)}
	p, h := filesystemconnect.NewFilesystemHandler(fsys, connect.WithReadMaxBytes(maxFSRequest), noCompression, connect.WithInterceptors(ctxCodes{}))
	mux.Handle(p, connectStatus(h, maxFSRequest))
}

// fsService is envd's filesystem.Filesystem over withruntime's files API.
type fsService struct {
	s        *Server
	watchers *watchers
	lists    *keyLimiter
}

var _ filesystemconnect.FilesystemHandler = (*fsService)(nil)

// sandboxOf is the sandbox ServeHTTP resolved for the request.
func sandboxOf(ctx context.Context) (*Sandbox, error) {
	sb, ok := ctx.Value(sandboxKey{}).(*Sandbox)
	if !ok {
		return nil, connect.NewError(connect.CodeInternal, errors.New("no sandbox resolved"))
	}
	return sb, nil
}

func (f *fsService) Stat(ctx context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	fi, err := statAs(ctx, sb, resolvePath(sb.User, req.Msg.Path))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: entryInfo(followLink(ctx, sb, *fi), sb.User)}), nil
}

func (f *fsService) MakeDir(ctx context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	p := resolvePath(sb.User, req.Msg.Path)
	// withruntime's mkdir accepts a directory that exists; E2B's clients
	// need already_exists to answer make_dir False.
	switch fi, err := statAs(ctx, sb, p); {
	case err == nil && fi.Type == api.FileTypeDir:
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("directory "+p+" already exists"))
	case err == nil:
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New(p+" already exists and is not a directory"))
	case !isNotFound(err):
		return nil, connectError(err)
	}
	fi, err := mkdirAs(ctx, sb, p)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: entryInfo(*fi, sb.User)}), nil
}

func (f *fsService) Move(ctx context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	src, dst := resolvePath(sb.User, req.Msg.Source), resolvePath(sb.User, req.Msg.Destination)
	if err := moveAs(ctx, sb, src, dst); err != nil {
		return nil, connectError(err)
	}
	fi, err := statAs(ctx, sb, dst)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: entryInfo(*fi, sb.User)}), nil
}

func (f *fsService) ListDir(ctx context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.Depth)
	if depth < 1 {
		depth = 1
	}
	if depth > maxDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("depth is at most 32"))
	}
	p := resolvePath(sb.User, req.Msg.Path)
	fi, err := statAs(ctx, sb, p)
	if err != nil {
		return nil, connectError(err)
	}
	if fi.Type != api.FileTypeDir {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(p+" is not a directory"))
	}
	infos, err := f.listTree(ctx, sb, p, depth)
	if err != nil {
		return nil, connectError(err)
	}
	sortWalk(infos)
	out := &fspb.ListDirResponse{Entries: make([]*fspb.EntryInfo, 0, len(infos))}
	for _, fi := range infos {
		out.Entries = append(out.Entries, entryInfo(followLink(ctx, sb, fi), sb.User))
	}
	return connect.NewResponse(out), nil
}

// listTree lists dir and, down to depth levels, its subdirectories
// (symbolic links are not followed), at most maxListed entries. A
// subdirectory that vanishes meanwhile is skipped. Each listing asks the
// API for no more entries than are left to take, and an account has at
// most maxListsPerAccount trees listed at once: what a listing holds is
// bounded by both.
func (f *fsService) listTree(ctx context.Context, sb *Sandbox, dir string, depth int) ([]api.FileInfo, error) {
	release, err := f.lists.acquire(ctx, sb.acct)
	if err != nil {
		return nil, err
	}
	defer release()
	tooMany := &Error{Status: http.StatusBadRequest, Message: "more than 10000 entries: list a smaller depth"}
	var out []api.FileInfo
	level := []string{dir}
	for d := 1; d <= depth && len(level) > 0; d++ {
		var next []string
		for _, p := range level {
			left := maxListed - len(out)
			l, err := listAs(ctx, sb, p, left+1)
			if err != nil {
				if p != dir && isNotFound(err) {
					continue
				}
				return nil, err
			}
			if l.Truncated || len(l.Entries) > left {
				return nil, tooMany
			}
			for _, e := range l.Entries {
				if e.Path == "" {
					e.Path = path.Join(p, e.Name)
				}
				out = append(out, e)
				if e.Type == api.FileTypeDir {
					next = append(next, e.Path)
				}
			}
		}
		level = next
	}
	return out, nil
}

func (f *fsService) Remove(ctx context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	sb, err := sandboxOf(ctx)
	if err != nil {
		return nil, err
	}
	// E2B's remove of a path that is not there succeeds, as rm -f does.
	if err := removeAs(ctx, sb, resolvePath(sb.User, req.Msg.Path)); err != nil && !isNotFound(err) {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}

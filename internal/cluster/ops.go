package cluster

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Get returns a sandbox of the account from the store.
func (c *Control) Get(ctx context.Context, account, id string) (*sandbox.Record, error) {
	rec, err := c.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if account != "" && rec.Account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return rec, nil
}

// List returns the account's sandboxes (every account's for "") from the
// store, whatever node holds them.
func (c *Control) List(ctx context.Context, account string) ([]*sandbox.Record, error) {
	return c.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{Account: account})
}

// errNodeGone is the refusal of a call about a sandbox whose node is lost
// or whose lease ran out.
func errNodeGone(rec *sandbox.Record) error {
	return sandbox.Errorf(sandbox.KindConflict, "the node of sandbox %s is lost", rec.ID)
}

// nodeOf returns the record's node and its client, or errNodeGone.
func (c *Control) nodeOf(ctx context.Context, rec *sandbox.Record) (*noderpc.Client, error) {
	_, cl, err := c.entryOf(ctx, rec)
	return cl, err
}

// entryOf is nodeOf with the node's entry as read (nil: there is none).
func (c *Control) entryOf(ctx context.Context, rec *sandbox.Record) (*store.Node, *noderpc.Client, error) {
	n, err := c.cfg.Store.GetNode(ctx, rec.Node)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, nil, errNodeGone(rec)
	}
	if err != nil {
		return nil, nil, err
	}
	if !live(*n) {
		return n, nil, errNodeGone(rec)
	}
	cl, err := c.client(*n)
	return n, cl, err
}

// sandboxNode returns the account's sandbox id and its node's client, or
// errNodeGone.
func (c *Control) sandboxNode(ctx context.Context, account, id string) (*sandbox.Record, *noderpc.Client, error) {
	rec, err := c.Get(ctx, account, id)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.nodeOf(ctx, rec)
	return rec, cl, err
}

// op runs a noderpc operation on the record's node.
func (c *Control) op(ctx context.Context, account, id, op string, timeout time.Duration) (*sandbox.Record, error) {
	rec, cl, err := c.sandboxNode(ctx, account, id)
	if err != nil {
		return nil, err
	}
	return checked(id, account, []string{rec.Node})(answer(cl.Op(ctx, id, op, noderpc.OpRequest{Account: account, TimeoutMs: timeout.Milliseconds()})))
}

// checked returns a function that passes on a node's answer about sandbox
// id only if it is that sandbox, of the account (any for ""), on one of
// nodes: the API server shows what it got to the caller, so a node that
// answers with another's record (a bug, or a node gone wrong) must not
// leak it.
func checked(id, account string, nodes []string) func(*sandbox.Record, error) (*sandbox.Record, error) {
	return func(rec *sandbox.Record, err error) (*sandbox.Record, error) {
		if err != nil {
			return nil, err
		}
		if err := trust(rec, id, account, nodes); err != nil {
			return nil, err
		}
		return rec, nil
	}
}

// trust checks a record a node returned (id "": a create's, any id).
func trust(rec *sandbox.Record, id, account string, nodes []string) error {
	switch {
	case rec == nil:
		return sandbox.Errorf(sandbox.KindInternal, "the node answered without a sandbox")
	case rec.ID == "" || id != "" && rec.ID != id:
		return sandbox.Errorf(sandbox.KindInternal, "the node answered about sandbox %q, not %s", rec.ID, id)
	case rec.Node == "" || !slices.Contains(nodes, rec.Node):
		return sandbox.Errorf(sandbox.KindInternal, "the node answered with sandbox %s on node %q, not %s", rec.ID, rec.Node, strings.Join(nodes, " or "))
	case account != "" && rec.Account != account:
		return sandbox.Errorf(sandbox.KindInternal, "the node answered with sandbox %s of another account", rec.ID)
	}
	return nil
}

// answer gives a call that got no answer the kind the API shows.
func answer[T any](v T, err error) (T, error) {
	if err != nil && noderpc.IsTransportError(err) {
		var zero T
		msg := "the sandbox's node did not answer"
		if noderpc.IsDialError(err) {
			msg = "the sandbox's node cannot be reached"
		}
		return zero, sandbox.Wrap(sandbox.KindInternal, err, msg)
	}
	return v, err
}

// Extend moves a running sandbox's lease on its node.
func (c *Control) Extend(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error) {
	return c.op(ctx, account, id, noderpc.OpExtend, timeout)
}

// SetLease sets a running sandbox's lease on its node.
func (c *Control) SetLease(ctx context.Context, account, id string, timeout time.Duration) (*sandbox.Record, error) {
	return c.op(ctx, account, id, noderpc.OpSetLease, timeout)
}

// Pause pauses a sandbox on its node.
func (c *Control) Pause(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return c.op(ctx, account, id, noderpc.OpPause, 0)
}

// Stop ends a sandbox on its node. A sandbox whose node is gone ends at
// once (node_lost): nothing runs behind it any more, or will not for
// long, since the node fences itself before its lease runs out. A paused
// sandbox whose checkpoint is shared is stopped by a compatible node,
// which removes the checkpoint too.
func (c *Control) Stop(ctx context.Context, account, id string) (*sandbox.Record, error) {
	rec, err := c.Get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if rec.State == sandbox.StateEnded {
		return rec, nil
	}
	entry, cl, err := c.entryOf(ctx, rec)
	if err == nil {
		return checked(id, account, []string{rec.Node})(answer(cl.Op(ctx, id, noderpc.OpStop, noderpc.OpRequest{Account: account})))
	}
	if sandbox.KindOf(err) != sandbox.KindConflict {
		return nil, err
	}
	if shared(rec) {
		nodes, err := c.compatible(ctx, rec)
		if err != nil {
			return nil, err
		}
		if len(nodes) > 0 {
			return c.onEach(ctx, nodes, id, noderpc.OpStop, account, rec.Node)
		}
	}
	// Only records of the registration found gone end; with no entry,
	// nothing can come back under it.
	node, epoch := rec.Node, int64(math.MaxInt64)
	if entry != nil {
		epoch = entry.Epoch
	}
	rec, ended, err := c.endLost(ctx, id, node, epoch, true, func(r *sandbox.Record) bool { return r.State != sandbox.StateEnded })
	if err != nil || ended || rec.State == sandbox.StateEnded {
		return rec, err
	}
	return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s moved on meanwhile (another node, or its node came back); stop it again", id)
}

// Resume resumes a paused sandbox on its node, or, when its checkpoint is
// shared and its node is gone, on a live node that can restore it.
func (c *Control) Resume(ctx context.Context, account, id string) (*sandbox.Record, error) {
	rec, err := c.Get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	cl, err := c.nodeOf(ctx, rec)
	if err != nil && sandbox.KindOf(err) == sandbox.KindConflict && rec.State == sandbox.StatePaused && shared(rec) {
		nodes, err := c.compatible(ctx, rec)
		if err != nil {
			return nil, err
		}
		if len(nodes) == 0 {
			return nil, sandbox.Errorf(sandbox.KindCapacityExhausted, "no live node can restore the checkpoint of sandbox %s (its node is lost)", id)
		}
		return c.onEach(ctx, nodes, id, noderpc.OpResume, account, "")
	}
	if err != nil {
		return nil, err
	}
	return checked(id, account, []string{rec.Node})(answer(cl.Op(ctx, id, noderpc.OpResume, noderpc.OpRequest{Account: account})))
}

// onEach runs op on the first of nodes that takes it: a node without room
// or that cannot be reached is passed over, as for creates; one that may
// have received the call is not. The record that comes back names the
// node that took the call, or, when not "", was (a stop leaves a stopped
// shared checkpoint's record on the node that paused it).
func (c *Control) onEach(ctx context.Context, nodes []store.Node, id, op, account, was string) (*sandbox.Record, error) {
	return c.onEachReq(ctx, nodes, id, op, noderpc.OpRequest{Account: account}, was)
}

// onEachReq is onEach with the request to send.
func (c *Control) onEachReq(ctx context.Context, nodes []store.Node, id, op string, req noderpc.OpRequest, was string) (*sandbox.Record, error) {
	account := req.Account
	var last error
	for _, n := range nodes {
		cl, err := c.client(n)
		if err != nil {
			return nil, err
		}
		rec, err := cl.Op(ctx, id, op, req)
		if err == nil || !noderpc.IsDialError(err) && sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
			return checked(id, account, []string{n.ID, was})(answer(rec, err))
		}
		c.log.Info("node cannot take a shared checkpoint; trying the next", "sandbox_id", id, "node", n.ID, "op", op, "err", err)
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return answer[*sandbox.Record](nil, last)
}

func shared(rec *sandbox.Record) bool { return rec.Checkpoint != nil && rec.Checkpoint.Shared }

// compatible returns the live nodes that can restore rec's shared
// checkpoint: those with room by their last report first, least loaded
// first, then the others (each says for itself whether it has room).
func (c *Control) compatible(ctx context.Context, rec *sandbox.Record) ([]store.Node, error) {
	nodes, err := c.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	var fits []store.Node
	for _, n := range nodes {
		if live(n) && n.SharedCheckpoints && n.Compat == rec.Checkpoint.Compat && runs(n, rec.Spec.Isolation) {
			fits = append(fits, n)
		}
	}
	var out []store.Node
	for _, cd := range c.candidates(fits, size{rec.Spec.VCPUs, rec.Spec.MemoryMiB, rec.Spec.DiskMiB}, "", false) {
		out = append(out, cd.node)
	}
	for _, n := range fits {
		if !slices.ContainsFunc(out, func(o store.Node) bool { return o.ID == n.ID }) {
			out = append(out, n)
		}
	}
	return out, nil
}

// SetNetwork replaces a sandbox's egress policy on its node.
func (c *Control) SetNetwork(ctx context.Context, account, id string, n sandbox.Network) (*sandbox.Record, error) {
	rec, cl, err := c.sandboxNode(ctx, account, id)
	if err != nil {
		return nil, err
	}
	return checked(id, account, []string{rec.Node})(answer(cl.SetNetwork(ctx, id, noderpc.NetworkRequest{Account: account, Network: n})))
}

// Egress returns a sandbox's egress log from its node.
func (c *Control) Egress(ctx context.Context, account, id string) ([]egress.Event, error) {
	_, cl, err := c.sandboxNode(ctx, account, id)
	if err != nil {
		return nil, err
	}
	return answer(cl.Egress(ctx, account, id))
}

// Agent returns a round tripper to a running sandbox's agent through its
// node; a paused one created to resume on use is resumed first. Of two
// such calls at once the second's resume is a conflict: it goes on when
// the sandbox runs by then.
func (c *Control) Agent(ctx context.Context, account, id string) (http.RoundTripper, error) {
	rec, err := c.Get(ctx, account, id)
	if err != nil {
		return nil, err
	}
	if rec.Spec.AutoResume && rec.State == sandbox.StatePaused {
		if _, err := c.Resume(ctx, account, id); err != nil {
			if rec, _ = c.Get(ctx, account, id); rec == nil || rec.State != sandbox.StateRunning {
				return nil, err
			}
		} else if rec, err = c.Get(ctx, account, id); err != nil {
			return nil, err
		}
	}
	if rec.State != sandbox.StateRunning {
		return nil, stateError(rec, "use")
	}
	cl, err := c.nodeOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	return cl.AgentTransport(account, id), nil
}

// stateError says why an operation is refused in the record's state, as
// the manager says it.
func stateError(rec *sandbox.Record, op string) error {
	if rec.State == sandbox.StateEnded && rec.EndReason == sandbox.EndLeaseEnded {
		return sandbox.Errorf(sandbox.KindLeaseEnded, "cannot %s sandbox %s: its lease ended", op, rec.ID)
	}
	if rec.State == sandbox.StateEnded {
		return sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s: it has ended (%s)", op, rec.ID, rec.EndReason)
	}
	return sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s while it is %s", op, rec.ID, rec.State)
}

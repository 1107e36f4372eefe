package sandbox

import (
	"slices"
	"time"
)

// The life of a record, as one table. Every change of a Record's state goes
// through Move or End (both through allowed), so what the manager, the
// reaper, the pools and the cluster's failure detector may do to a record
// is written here once:
//
//	(no record) -> starting   a create admits its record before the backend starts it
//	(no record) -> running    a pool member handed over is running from its first write
//	starting    -> running    the backend started or restored it
//	starting    -> paused     a resume that did not happen (or was cut short) is put back
//	running     -> paused     a checkpoint
//	paused      -> starting   a resume admits its record before the backend restores it
//	any but ended -> ended    with the reasons below; ended is final
//
// A resume never goes from paused to running directly: its starting record
// is what the store counts against the account and what makes two nodes'
// resumes of one shared checkpoint exclusive.
//
// The end reasons a state may end with follow from who ends it: lease_ended
// and spending_limit only a running sandbox (the reaper, the spending
// check); retention_ended only a paused one; host_restart what a restarted
// server finds starting or running. node_lost, stopped (a client, or a
// microVM's guest powering off), error and out_of_memory (what an instance
// reports when it ends by itself) may end any live or paused record: a
// store write that committed though it answered an error can leave a
// record a state behind its sandbox, and the end must still be recorded.
var transitions = map[State][]State{
	"":            {StateStarting, StateRunning},
	StateStarting: {StateRunning, StatePaused, StateEnded},
	StateRunning:  {StatePaused, StateEnded},
	StatePaused:   {StateStarting, StateEnded},
	StateEnded:    nil,
}

// endReasons are the reasons each state may end with (see transitions).
var endReasons = map[State][]EndReason{
	StateStarting: {EndStopped, EndHostRestart, EndNodeLost, EndError, EndOutOfMemory},
	StateRunning:  {EndStopped, EndLeaseEnded, EndOutOfMemory, EndSpendingLimit, EndHostRestart, EndNodeLost, EndError},
	StatePaused:   {EndStopped, EndRetentionEnded, EndNodeLost, EndError, EndOutOfMemory},
}

// allStates are every state, in the order of a sandbox's life.
var allStates = []State{StateStarting, StateRunning, StatePaused, StateEnded}

// allEndReasons are every end reason.
var allEndReasons = []EndReason{EndStopped, EndLeaseEnded, EndOutOfMemory, EndSpendingLimit, EndRetentionEnded, EndHostRestart, EndNodeLost, EndError}

// allowed says whether the table lets a record go from state from to state
// to, ending with reason when to is ended (reason is ignored otherwise;
// from "" is a record not made yet). A refused transition is a conflict:
// the record is not in a state the change may be made from.
func allowed(from, to State, reason EndReason) error {
	if !slices.Contains(transitions[from], to) {
		if from == "" {
			return Errorf(KindConflict, "a new sandbox cannot be %s", to)
		}
		return Errorf(KindConflict, "a sandbox cannot go from %s to %s", from, to)
	}
	if to == StateEnded && !slices.Contains(endReasons[from], reason) {
		return Errorf(KindConflict, "a sandbox cannot end with reason %q while it is %s", reason, from)
	}
	return nil
}

// Move changes the record's state to to, when the table allows it, and
// leaves the record as it is otherwise. The other fields that go with the
// change (the start or pause time, the retention) are the caller's: they
// differ between a create and a resume. A record ends through End, which
// records why.
func (r *Record) Move(to State) error {
	if to == StateEnded {
		return Errorf(KindConflict, "sandbox %s cannot end without a reason", r.ID)
	}
	if err := allowed(r.State, to, ""); err != nil {
		return err
	}
	r.State = to
	return nil
}

// End ends the record at at with reason and msg, when the table allows it,
// and leaves the record as it is otherwise: an ended record is not ended
// again (callers that treat a second end as done check State first). An
// ended record keeps no retention.
func (r *Record) End(reason EndReason, msg string, at time.Time) error {
	if err := allowed(r.State, StateEnded, reason); err != nil {
		return err
	}
	r.State, r.EndedAt, r.EndReason, r.EndMessage = StateEnded, &at, reason, msg
	r.RetentionEndsAt = nil
	return nil
}

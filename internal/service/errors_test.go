package service

import (
	"errors"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		kind sandbox.Kind
		want int
	}{
		{sandbox.KindInvalid, 400},
		{sandbox.KindUnauthorized, 401},
		{sandbox.KindForbidden, 403},
		{sandbox.KindNotFound, 404},
		{sandbox.KindConflict, 409},
		{sandbox.KindLeaseEnded, 409},
		{sandbox.KindPayloadTooLarge, 413},
		{sandbox.KindNotSupported, 422},
		{sandbox.KindMaxCost, 402},
		{sandbox.KindSpendingLimit, 402},
		{sandbox.KindTrialExhausted, 402},
		{sandbox.KindConcurrency, 429},
		{sandbox.KindRateLimited, 429},
		{sandbox.KindCapacityExhausted, 503},
		{sandbox.KindInternal, 500},
		{sandbox.KindBadGateway, 502},
		{sandbox.Kind("made_up"), 500},
	}
	for _, tt := range tests {
		if got := Status(tt.kind); got != tt.want {
			t.Errorf("Status(%q): got %d, want %d", tt.kind, got, tt.want)
		}
	}
	if got, want := len(Kinds()), len(tests)-1; got != want {
		t.Errorf("statuses maps %d kinds, the test knows %d: keep them together", got, want)
	}
}

// TestPublic pins what a client reads of an error: a known kind's code
// and message, a default message from the code, and nothing of an error
// without a known kind.
func TestPublic(t *testing.T) {
	tests := []struct {
		err  error
		kind sandbox.Kind
		msg  string
	}{
		{sandbox.Errorf(sandbox.KindNotFound, "sandbox x not found"), sandbox.KindNotFound, "sandbox x not found"},
		{sandbox.Wrap(sandbox.KindConflict, errors.New("secret detail"), "busy"), sandbox.KindConflict, "busy"},
		{sandbox.ErrLeaseEnded, sandbox.KindLeaseEnded, "lease ended"},
		{errors.New("secret detail"), sandbox.KindInternal, "internal error"},
		{sandbox.Errorf(sandbox.Kind("made_up"), "secret detail"), sandbox.KindInternal, "internal error"},
	}
	for _, tt := range tests {
		if k, msg := Public(tt.err); k != tt.kind || msg != tt.msg {
			t.Errorf("Public(%v): got %s %q, want %s %q", tt.err, k, msg, tt.kind, tt.msg)
		}
	}
}

package sandbox

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorKinds(t *testing.T) {
	err := fmt.Errorf("looking up: %w", Errorf(KindNotFound, "sandbox %s not found", "x"))
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		t.Fatalf("errors.Is: got a match for the wrong kind")
	}
	if KindOf(err) != KindNotFound || MessageOf(err) != "sandbox x not found" {
		t.Fatalf("got %s %q", KindOf(err), MessageOf(err))
	}
	internal := Wrap(KindInternal, errors.New("runsc: secret detail"), "the sandbox could not be started")
	if MessageOf(internal) != "the sandbox could not be started" {
		t.Fatalf("client message leaks the cause: %q", MessageOf(internal))
	}
	plain := errors.New("disk on fire")
	if KindOf(plain) != KindInternal || MessageOf(plain) != "internal error" {
		t.Fatalf("an error without a kind: got %s %q", KindOf(plain), MessageOf(plain))
	}
}

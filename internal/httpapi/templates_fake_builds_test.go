package httpapi

import (
	"context"
	"io"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// The builds of fakeTemplates: every build is queued at once, and any id
// is a finished build of the caller's account with a log of one event.

func (f *fakeTemplates) Build(_ context.Context, account, keyID string, spec []byte, context io.Reader, _ template.BuildSize) (*template.Build, error) {
	f.call("build", account)
	if context != nil {
		io.Copy(io.Discard, context)
	}
	return &template.Build{ID: "bld_0123456789abcdef", Template: "app:latest", State: template.BuildQueued, CreatedAt: time.Now()}, nil
}

func (f *fakeTemplates) GetBuild(_ context.Context, account, id string) (*template.Build, error) {
	f.call("get build", account)
	if id == "" {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no build")
	}
	now := time.Now()
	return &template.Build{ID: id, Template: "app:latest", State: template.BuildSucceeded, CreatedAt: now, EndedAt: &now}, nil
}

func (f *fakeTemplates) BuildLogs(_ context.Context, account, id string, follow bool, fn func(template.BuildEvent) error) error {
	f.call("build logs", account)
	return fn(template.BuildEvent{Time: time.Now(), Type: template.LogEnd, State: template.BuildSucceeded})
}

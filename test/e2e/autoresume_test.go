package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// TestAutoResume (issue 27): a real gVisor sandbox created with
// auto_resume and on_lease_end pause is paused by its lease, then woken by
// an exec, which runs; paused again by a call, it is woken by a preview
// request in each form, which python3 -m http.server (started before the
// first pause, checkpointed with the rest) answers; a read-only key's file
// read wakes it too. One created without auto_resume stays paused (409
// conflict), and an ended one stays ended.
func TestAutoResume(t *testing.T) {
	r := startPreviewRig(t, "localhost", "")
	ctx := t.Context()
	sb, err := r.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 20, OnLeaseEnd: "pause", AutoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.c.StopSandbox(ctx, sb.ID)
	if !sb.AutoResume {
		t.Fatalf("the create's answer: got auto_resume false, want true")
	}
	if _, err := r.c.WriteFile(ctx, sb.ID, "/tmp/site/index.html", strings.NewReader("served after the wake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := api.Command{Argv: []string{"python3", "-m", "http.server", fmt.Sprint(appPort), "--bind", "127.0.0.1", "--directory", "/tmp/site"}}
	if _, err := r.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: serve, Background: true}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if resp, body := r.do(t, r.pathReq(sb.ID, appPort, "/", "key")); resp.StatusCode == http.StatusOK {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the server never answered through the preview: %d %s", resp.StatusCode, trim(body))
		}
	}

	waitState(t, r.c, sb.ID, "paused", time.Minute)
	res, err := r.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"cat", "/tmp/site/index.html"}}}, client.ExecOptions{})
	if err != nil || res.Stdout != "served after the wake\n" {
		t.Fatalf("exec on the sandbox its lease paused: got %+v, %v; want the file", res, err)
	}
	wantState(t, r.c, sb.ID, "running")
	if _, err := r.c.ExtendSandbox(ctx, sb.ID, 600); err != nil {
		t.Fatal(err)
	}
	for _, form := range previewForms {
		if _, err := r.c.PauseSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		body := r.expect(t, r.req(form, sb.ID, appPort, "/", "key"), http.StatusOK, "")
		if string(body) != "served after the wake\n" {
			t.Fatalf("%s form on the paused sandbox: got %q, want the page", form, body)
		}
		wantState(t, r.c, sb.ID, "running")
	}

	// A read-only key may not resume, but its file read wakes the
	// sandbox: the owner asked for it to run when used.
	ro := newKey(t, r.s, `{"kind":"read_only"}`)
	if _, err := r.c.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if st, body := call(t, r.s, ro.Secret, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/resume", nil); st != http.StatusForbidden {
		t.Fatalf("resume with a read-only key: got %d %s, want 403", st, body)
	}
	if st, body := call(t, r.s, ro.Secret, http.MethodGet, "/v1/sandboxes/"+sb.ID+"/files?path=/tmp/site/index.html", nil); st != http.StatusOK || string(body) != "served after the wake\n" {
		t.Fatalf("a file read with a read-only key on the paused sandbox: got %d %q, want 200 and the file", st, body)
	}
	wantState(t, r.c, sb.ID, "running")

	// Without auto_resume: 409, and it stays paused.
	plain, err := r.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer r.c.StopSandbox(ctx, plain.ID)
	if plain.AutoResume {
		t.Fatal("a create without auto_resume: got auto_resume true")
	}
	if _, err := r.c.PauseSandbox(ctx, plain.ID); err != nil {
		t.Fatal(err)
	}
	_, err = r.c.Exec(ctx, plain.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{})
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("exec on a paused sandbox without auto_resume: got %v, want conflict", err)
	}
	r.expect(t, r.pathReq(plain.ID, appPort, "/", "key"), http.StatusConflict, "conflict")
	wantState(t, r.c, plain.ID, "paused")

	// Ended: never resumed.
	if _, err := r.c.PauseSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.StopSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{}); err == nil {
		t.Fatal("exec on an ended sandbox with auto_resume: got no error")
	}
	wantState(t, r.c, sb.ID, "ended")
}

// waitState waits up to d for sandbox id to be in state.
func waitState(t *testing.T, c *client.Client, id, state string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
		sb, err := c.GetSandbox(t.Context(), id)
		if err == nil && sb.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s after %v: got %+v, %v; want %s", id, d, sb, err, state)
		}
	}
}

// wantState fails the test unless sandbox id is in state now.
func wantState(t *testing.T, c *client.Client, id, state string) {
	t.Helper()
	if sb, err := c.GetSandbox(t.Context(), id); err != nil || sb.State != state {
		t.Fatalf("sandbox %s: got %+v, %v; want %s", id, sb, err, state)
	}
}

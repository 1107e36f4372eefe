package e2bcompat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// Helper cells: code the layer runs in a context around or before the
// caller's cell, their output discarded. They bump the kernel's execution
// count like any cell.

// e2bHome is where E2B's contexts start (and the sandbox user's HOME);
// withruntime's start in /workspace.
const e2bHome = "/home/user"

// chdirHomeCell moves a kernel to E2B's default cwd.
const chdirHomeCell = `__import__("os").chdir(` + `"` + e2bHome + `"` + `)`

// setEnvCell sets env in the kernel's os.environ and keeps what it
// replaced in one global, for restoreEnvCell. The values travel base64'd:
// no quoting of the caller's text into Python source.
func setEnvCell(env map[string]string) string {
	b, _ := json.Marshal(env) // a map of strings always encodes
	return fmt.Sprintf(`_withruntime_e2b_saved_env = (lambda os, new: `+
		`({k: os.environ.get(k) for k in new}, os.environ.update(new))[0])`+
		`(__import__("os"), __import__("json").loads(__import__("base64").b64decode(%q)))`,
		base64.StdEncoding.EncodeToString(b))
}

// restoreEnvCell puts back what setEnvCell replaced (removing what was
// unset before) and drops its global.
const restoreEnvCell = `(lambda os, saved: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v) ` +
	`for k, v in saved.items()])(__import__("os"), globals().pop("_withruntime_e2b_saved_env", {}));`

// helperTimeout bounds a helper cell; it waits its turn behind any cell
// already running in the context, so it is generous.
const helperTimeout = 2 * time.Minute

// runHelper runs a helper cell; its output is dropped, its exception is
// the error (name and value, as a cell's would be).
func runHelper(ctx context.Context, sbx *Sandbox, contextID, code string) (*api.CodeException, error) {
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	// No-op callbacks with Discard: what a helper prints is kept nowhere.
	drop := func(string) {}
	ex, err := sbx.C.RunCode(ctx, sbx.ID, api.CodeRequest{Code: code, ContextID: contextID}, client.CodeOptions{
		Stdout: drop, Stderr: drop, Result: func(api.CodeResult) {}, Discard: true,
	})
	if err != nil {
		return nil, err
	}
	return ex.Error, nil
}

// prepareDefault makes the default context, in E2B's cwd, if it does not
// exist yet: a cell naming no context then runs where E2B's would (and
// where relative paths of E2B's files API point). A default context made
// through withruntime's own API first keeps its /workspace.
func prepareDefault(ctx context.Context, sbx *Sandbox) error {
	l, err := sbx.C.ListContexts(ctx, sbx.ID)
	if err != nil {
		return err
	}
	for _, c := range l {
		if c.ID == defaultContextID {
			return nil
		}
	}
	return chdirHome(ctx, sbx, "")
}

// chdirHome moves context id ("" the default one) to E2B's home.
func chdirHome(ctx context.Context, sbx *Sandbox, id string) error {
	exc, err := runHelper(ctx, sbx, id, chdirHomeCell)
	if err != nil {
		return err
	}
	if exc != nil {
		return fmt.Errorf("moving the context to %s: %s: %s", e2bHome, exc.Name, exc.Value)
	}
	return nil
}

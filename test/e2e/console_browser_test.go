package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/console"
	"github.com/withruntime/withruntime/internal/testenv"
)

// artifactDir is where the console test writes its screenshots:
// $WITHRUNTIME_TEST_ARTIFACTS/console when set (CI keeps that folder),
// else a folder of the test's own that goes with it.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("WITHRUNTIME_TEST_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// step runs chromedp actions with a timeout of their own.
func (b *browserTab) step(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\npage: %s", what, err, page)
	}
}

// until polls a JavaScript expression until it is true.
func (b *browserTab) until(t *testing.T, what, expr string) {
	t.Helper()
	b.untilFor(t, 55*time.Second, what, expr)
}

// untilFor is until, for at most d.
func (b *browserTab) untilFor(t *testing.T, d time.Duration, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s never held (%s): %v\npage: %s", what, expr, err, page)
	}
}

// shoot writes a screenshot of the whole page to dir/name.png.
func (b *browserTab) shoot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// TestConsole drives the web console in headless Chromium against a real
// server: sign in with the admin key, find a sandbox made through the API,
// run a command in its terminal and read the output off the page, download
// a file, see a refused connection in its egress log, find a read-only
// key's console without a stop (and the server refusing one), pause and
// resume it, see its cost chart, take a snapshot of it, and stop it
// through the confirmation; then the snapshots page (a sandbox started
// from the snapshot, its delete) and the volumes page (a create, a
// refusal, a volume's files and a download, a delete).
func TestConsole(t *testing.T) {
	requireChromium(t)
	s := testenv.StartServer(t)
	r := &recorder{s: s}
	shots := artifactDir(t)

	st, data := call(t, s, s.Key, "POST", "/v1/keys", strings.NewReader(`{"kind":"read_only","name":"viewer"}`))
	var ro api.Key
	if st != http.StatusCreated || json.Unmarshal(data, &ro) != nil || ro.Secret == "" {
		t.Fatalf("creating a read-only key: %d %s", st, data)
	}
	sbx := newBox(t, r, `{"internet":true,"allow":["allowed.example.test"]}`, nil)
	const fileBody = "downloaded through the console\n"
	sbx.put(t, "/workspace/console-download.txt", []byte(fileBody))

	downloads := t.TempDir()
	b := startBrowser(t)
	b.step(t, "allowing downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads,
		})
		return err
	}))

	signIn := func(t *testing.T, key string) {
		t.Helper()
		b.open(t, "about:blank") // a navigation of its own, never within the page
		resp := b.open(t, s.URL+"/console/")
		// (Chromium answers no response for some navigations back to a
		// page it holds; the headers are checked where it does.)
		if resp != nil {
			if resp.Status != http.StatusOK {
				t.Fatalf("/console/ answered %d", resp.Status)
			}
			if got := fmt.Sprint(resp.Headers["Content-Security-Policy"]); got != console.CSP {
				t.Fatalf("the page's CSP: %q, want %q", got, console.CSP)
			}
		}
		b.step(t, "signing in", chromedp.WaitVisible(chromedp.CSS("#key")), chromedp.SendKeys(chromedp.CSS("#key"), key), chromedp.Click(chromedp.CSS("#signin-submit")))
		b.until(t, "the sandbox in the list", fmt.Sprintf(`!!document.querySelector('#sandboxes tr[data-id=%q]')`, sbx.ID))
	}

	t.Run("sign in, the sandbox in the live list", func(t *testing.T) {
		signIn(t, s.Key)
		if got := b.eval(t, `sessionStorage.getItem("withruntime.key") === `+jsString(s.Key)+` ? "kept" : "missing"`); got != "kept" {
			t.Fatalf("the key in session storage: %s", got)
		}
		if c := b.eval(t, `document.cookie`); c != "" {
			t.Fatalf("the console set cookies: %q", c)
		}
		// The policy holds in the browser: a script written into the page
		// does not run.
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise(done => {
			document.addEventListener("securitypolicyviolation", e => done(e.effectiveDirective), {once: true});
			const s = document.createElement("script");
			s.textContent = "window.inlineRan = true";
			document.body.append(s);
			setTimeout(() => done("no violation, ran: " + !!window.inlineRan), 3000);
		})`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
		if err != nil || got != "script-src-elem" {
			t.Fatalf("an inline script in the page: %q %v, want it refused under script-src-elem", got, err)
		}
		b.until(t, "the row's state", fmt.Sprintf(`document.querySelector('#sandboxes tr[data-id=%q]').dataset.state === "running"`, sbx.ID))
		// A sandbox made now appears without a reload: the list refreshes.
		other := newBox(t, r, `{"internet":false}`, nil)
		b.until(t, "a new sandbox in the list", fmt.Sprintf(`!!document.querySelector('#sandboxes tr[data-id=%q]')`, other.ID))
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+other.ID, nil)
		b.step(t, "a narrow screen", chromedp.EmulateViewport(390, 844))
		b.shoot(t, shots, "01-list-narrow")
		b.step(t, "a wide screen", chromedp.EmulateViewport(1280, 900))
		b.shoot(t, shots, "02-list")
	})

	t.Run("keyboard only: open the sandbox, extend its lease through the dialog", func(t *testing.T) {
		leaseLeft := func() time.Duration {
			var sb api.Sandbox
			_, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil)
			if err := json.Unmarshal(data, &sb); err != nil {
				t.Fatal(err)
			}
			return time.Until(sb.LeaseEndsAt)
		}
		if left := leaseLeft(); left > 80*time.Minute {
			t.Fatalf("the lease has %v left already: the extension below would prove nothing", left)
		}
		link := fmt.Sprintf(`#sandboxes tr[data-id=%q] a`, sbx.ID)
		b.tabTo(t, link)
		// The list refreshes every 3 s: the focus stays on the link.
		stamp := b.eval(t, `document.querySelector("#list-stamp").textContent`)
		b.untilFor(t, 10*time.Second, "a refresh of the list", `document.querySelector("#list-stamp").textContent !== `+jsString(stamp))
		if got := b.eval(t, fmt.Sprintf(`document.activeElement.matches(%s) ? "kept" : document.activeElement.outerHTML.slice(0, 80)`, jsString(link))); got != "kept" {
			t.Fatalf("after the list's refresh the focus is on %s", got)
		}
		b.step(t, "Enter on the sandbox's link", pressKey("Enter"))
		b.until(t, "the sandbox page", `document.querySelector("#sbx-state") && document.querySelector("#sbx-state").textContent === "running"`)
		b.tabTo(t, "#extend-minutes")
		b.step(t, "typing 90 minutes", pressKey("Backspace"), pressKey("Backspace"), pressKey("Backspace"), typeText("90"))
		b.tabTo(t, "#btn-extend")
		b.step(t, "Enter on Extend", pressKey("Enter"))
		b.until(t, "the dialog, Cancel focused", `document.querySelector("#confirm").open && document.activeElement.id === "confirm-cancel"`)
		b.step(t, "Escape", pressKey("Escape"))
		b.until(t, "the dialog closed", `!document.querySelector("#confirm").open`)
		if left := leaseLeft(); left > 80*time.Minute {
			t.Fatalf("Escape extended the lease: %v left", left)
		}
		b.tabTo(t, "#btn-extend")
		b.step(t, "Enter on Extend again", pressKey("Enter"))
		b.until(t, "the dialog", `document.querySelector("#confirm").open`)
		b.tabTo(t, "#confirm-ok")
		b.step(t, "Enter on Confirm", pressKey("Enter"))
		deadline := time.Now().Add(30 * time.Second)
		for left := leaseLeft(); left < 80*time.Minute; left = leaseLeft() {
			if time.Now().After(deadline) {
				t.Fatalf("the lease has %v left, want about 90 minutes", left)
			}
			time.Sleep(200 * time.Millisecond)
		}
		b.step(t, "back to the list", chromedp.Evaluate[chromedp.Void](`location.hash = "#/sandboxes"`))
		b.until(t, "the list", fmt.Sprintf(`!!document.querySelector('#sandboxes tr[data-id=%q] a')`, sbx.ID))
	})

	t.Run("open it, a command in its terminal", func(t *testing.T) {
		b.step(t, "opening the sandbox", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sandboxes tr[data-id=%q] a`, sbx.ID))))
		b.until(t, "the sandbox page", `document.querySelector("#sbx-state") && document.querySelector("#sbx-state").textContent === "running"`)
		b.step(t, "opening a terminal", chromedp.Click(chromedp.CSS("#term-start")))
		b.until(t, "the terminal started", `/^terminal \d+$/.test(document.querySelector("#term-status").textContent)`)
		b.step(t, "typing", chromedp.Click(chromedp.CSS("#terminal .xterm-screen")), typeText("echo hello-from-console"), pressEnter())
		// The output line, not the typed command (which has "echo " before).
		b.until(t, "the command's output in the page", `[...document.querySelectorAll("#terminal .xterm-rows > div")].some(d => d.textContent.trim() === "hello-from-console")`)
		b.shoot(t, shots, "03-terminal")
	})

	t.Run("download a file", func(t *testing.T) {
		sel := `#files button.download[data-path="/workspace/console-download.txt"]`
		b.until(t, "the file in the list", `!!document.querySelector('`+sel+`')`)
		b.step(t, "downloading", chromedp.Click(chromedp.CSS(sel)))
		waitDownload(t, downloads, "console-download.txt", fileBody)
	})

	t.Run("upload a file", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "from-the-browser.txt")
		if err := os.WriteFile(local, []byte("uploaded through the console\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b.step(t, "choosing the file", chromedp.SetUploadFiles(chromedp.CSS("#upload"), []string{local}))
		b.until(t, "the upload in the list", `!!document.querySelector('#files button.download[data-path="/workspace/from-the-browser.txt"]')`)
		if res := sbx.sh(t, "cat /workspace/from-the-browser.txt"); res.Out != "uploaded through the console\n" {
			t.Fatalf("the uploaded file in the sandbox: %s", res)
		}
	})

	t.Run("extend the lease through the confirmation", func(t *testing.T) {
		var before api.Sandbox
		_, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil)
		if err := json.Unmarshal(data, &before); err != nil {
			t.Fatal(err)
		}
		b.step(t, "asking for 2 hours", chromedp.SetValue(chromedp.CSS("#extend-minutes"), "120"), chromedp.Click(chromedp.CSS("#btn-extend")))
		b.until(t, "the confirmation", `document.querySelector("#confirm").open`)
		b.step(t, "confirming", chromedp.Click(chromedp.CSS("#confirm-ok")))
		deadline := time.Now().Add(30 * time.Second)
		for {
			var after api.Sandbox
			_, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil)
			if json.Unmarshal(data, &after) == nil && after.LeaseEndsAt.Sub(time.Now()) > 100*time.Minute {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lease ends at %v (was %v), want about 2 hours from now", after.LeaseEndsAt, before.LeaseEndsAt)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("the egress log shows a refused connection", func(t *testing.T) {
		sbx.sh(t, `python3 -c 'import socket
try: socket.getaddrinfo("denied.example.test", 443)
except OSError: pass'`)
		sbx.expectEvent(t, 0, "denied.example.test", "refused", "name not allowed")
		b.step(t, "refreshing the log", chromedp.Click(chromedp.CSS("#egress-refresh")))
		b.until(t, "the refusal in the page", `[...document.querySelectorAll("#egress tbody tr")].some(r => r.textContent.includes("denied.example.test") && r.textContent.includes("refused") && r.textContent.includes("name not allowed"))`)
		b.until(t, "the network policy", `document.querySelector("#network").textContent.includes("allowed.example.test")`)
		// Samples come every 5 s; the page reloads them as often.
		b.until(t, "the metrics chart", `!!document.querySelector("#metrics-chart polyline.cpu")`)
		b.shoot(t, shots, "04-sandbox")
	})

	var snapID string
	t.Run("pause and resume through the confirmations, the cost chart, a snapshot", func(t *testing.T) {
		// Each through its confirmation, to the state the page and the API
		// then show, with the button for the way back.
		for _, step := range []struct{ button, state, back string }{{"#btn-pause", "paused", "#btn-resume"}, {"#btn-resume", "running", "#btn-pause"}} {
			b.confirmClick(t, step.button)
			b.until(t, step.state, fmt.Sprintf(`document.querySelector("#sbx-state").textContent === %q && !!document.querySelector(%q)`, step.state, step.back))
			if st, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil); st != http.StatusOK || !bytes.Contains(data, []byte(`"state":"`+step.state+`"`)) {
				t.Fatalf("after the console's %s: %d %s, want %s", step.button, st, data, step.state)
			}
		}
		// The cost chart: a line of the samples' cost so far, which has
		// grown over the sandbox's life (its last point above its first).
		b.until(t, "the cost chart", `(() => {
			const l = document.querySelector("#cost-chart polyline.cost");
			if (!l) return false;
			const p = l.getAttribute("points").trim().split(" ").map(xy => Number(xy.split(",")[1]));
			return p.length >= 2 && p[p.length - 1] < p[0];
		})()`)
		if got := b.eval(t, `document.querySelector("#cost-latest").textContent`); !strings.HasPrefix(got, "latest: $0.") {
			t.Fatalf("the latest cost: %q", got)
		}
		b.confirmClick(t, "#btn-snapshot")
		b.until(t, "the snapshot taken", `!!document.querySelector("#snapshot-taken")`)
		snapID = b.eval(t, `document.querySelector("#snapshot-taken").dataset.id`)
		if st, data := call(t, s, s.Key, "GET", "/v1/snapshots/"+snapID, nil); st != http.StatusOK || !bytes.Contains(data, []byte(sbx.ID)) {
			t.Fatalf("the console's snapshot %q: %d %s", snapID, st, data)
		}
		b.until(t, "running after the snapshot", `document.querySelector("#sbx-state").textContent === "running"`)
		b.shoot(t, shots, "04b-sandbox-cost")
		b.step(t, "settling after the screenshot", chromedp.EmulateViewport(1280, 900))
	})

	t.Run("a read-only key's console has no stop, and the server refuses one", func(t *testing.T) {
		b.step(t, "signing out", chromedp.Click(chromedp.CSS("#logout")))
		b.until(t, "the sign-in page", `!!document.querySelector("#signin") && sessionStorage.getItem("withruntime.key") === null`)
		signIn(t, ro.Secret)
		b.step(t, "opening the sandbox", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sandboxes tr[data-id=%q] a`, sbx.ID))))
		b.until(t, "the read-only page", `!!document.querySelector("#read-only-note") && document.querySelector("#sbx-state").textContent === "running"`)
		if got := b.eval(t, `String(!!document.querySelector("#btn-stop")) + " " + String(!!document.querySelector("#term-start"))`); got != "false false" {
			t.Fatalf("stop button, terminal button: %s, want neither", got)
		}
		// What the page would send, were the button there.
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`fetch("/v1/sandboxes/%s/stop", {method: "POST", headers: {Authorization: "Bearer " + sessionStorage.getItem("withruntime.key")}}).then(r => r.json().then(j => r.status + " " + j.error.code))`, sbx.ID), chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
		if err != nil || got != "403 forbidden" {
			t.Fatalf("a stop with the read-only key: %q %v, want 403 forbidden", got, err)
		}
		b.shoot(t, shots, "05-read-only")
		b.step(t, "settling after the screenshot", chromedp.EmulateViewport(1280, 900))
		if got := b.eval(t, `String(!!document.querySelector("#btn-snapshot"))`); got != "false" {
			t.Fatal("a read-only key's sandbox page has a snapshot button")
		}
		b.step(t, "the volumes page", chromedp.Click(chromedp.CSS(`#nav a[href="#/volumes"]`)))
		b.until(t, "the volumes page", `!!document.querySelector("#volumes-list")?.firstChild`)
		if got := b.eval(t, `String(!!document.querySelector("#volume-create-form, #volumes button"))`); got != "false" {
			t.Fatal("a read-only key's volumes page has a create form or buttons")
		}
		b.step(t, "the snapshots page", chromedp.Click(chromedp.CSS(`#nav a[href="#/snapshots"]`)))
		b.until(t, "the snapshot listed", fmt.Sprintf(`!!document.querySelector('#snapshots tr[data-id=%q]')`, snapID))
		if got := b.eval(t, `String(document.querySelectorAll("#snapshots button").length)`); got != "0" {
			t.Fatalf("a read-only key's snapshots page has %s buttons", got)
		}
		b.step(t, "signing out", chromedp.Click(chromedp.CSS("#logout")))
	})

	t.Run("stop it through the confirmation", func(t *testing.T) {
		signIn(t, s.Key)
		b.step(t, "opening the sandbox", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sandboxes tr[data-id=%q] a`, sbx.ID))))
		b.until(t, "the stop button", `!!document.querySelector("#btn-stop")`)
		// Cancel first: nothing happens.
		b.step(t, "asking to stop", chromedp.Click(chromedp.CSS("#btn-stop")))
		b.until(t, "the confirmation", `document.querySelector("#confirm").open`)
		b.shoot(t, shots, "06-confirm")
		// A screenshot of the whole page resizes it for a moment: click
		// once it has settled.
		b.step(t, "settling", chromedp.EmulateViewport(1280, 900))
		b.step(t, "cancelling", chromedp.Click(chromedp.CSS("#confirm-cancel")))
		b.until(t, "the confirmation closed", `!document.querySelector("#confirm").open`)
		if st, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil); st != http.StatusOK || !bytes.Contains(data, []byte(`"state":"running"`)) {
			t.Fatalf("after cancel: %d %s, want running", st, data)
		}
		b.confirmClick(t, "#btn-stop")
		b.until(t, "ended, stopped", `document.querySelector("#sbx-state").textContent === "ended" && document.querySelector("#sbx-end-reason").textContent.startsWith("stopped")`)
		var got api.Sandbox
		if st, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sbx.ID, nil); st != http.StatusOK || json.Unmarshal(data, &got) != nil || got.State != "ended" || got.EndReason != "stopped" {
			t.Fatalf("after the console's stop: %d %s", st, data)
		}
		b.shoot(t, shots, "07-stopped")
	})

	t.Run("keys: create, the secret once, revoke; usage", func(t *testing.T) {
		b.step(t, "the keys page", chromedp.Click(chromedp.CSS(`#nav a[href="#/keys"]`)))
		b.until(t, "the keys and the usage chart", `!!document.querySelector("#keys") && !!document.querySelector("#usage-chart")`)
		b.step(t, "creating a key", chromedp.SendKeys(chromedp.CSS("#key-name"), "console-made"), chromedp.SetValue(chromedp.CSS("#key-kind"), "read_only"), chromedp.Click(chromedp.CSS("#key-create")))
		b.until(t, "the secret shown", `/^wr_/.test(document.querySelector("#key-secret") ? document.querySelector("#key-secret").textContent : "")`)
		secret := b.eval(t, `document.querySelector("#key-secret").textContent`)
		// A refusal shows its code and message.
		b.step(t, "a name too long", chromedp.SetValue(chromedp.CSS("#key-name"), strings.Repeat("n", 300)), chromedp.Click(chromedp.CSS("#key-create")))
		b.until(t, "the refusal", `document.querySelector("#keys-error").dataset.code === "invalid_request" && document.querySelector("#keys-error").textContent.startsWith("invalid_request: name must be at most")`)
		var k api.Key
		if st, data := call(t, s, secret, "GET", "/v1/keys/current", nil); st != http.StatusOK || json.Unmarshal(data, &k) != nil || k.Name != "console-made" || k.Kind != "read_only" {
			t.Fatalf("the console's new key: %d %s", st, data)
		}
		b.shoot(t, shots, "08-keys")
		b.step(t, "revoking it", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button.revoke[data-id=%q]`, k.ID))))
		b.until(t, "the confirmation", `document.querySelector("#confirm").open`)
		b.step(t, "confirming", chromedp.Click(chromedp.CSS("#confirm-ok")))
		b.until(t, "the key gone from the list", fmt.Sprintf(`!document.querySelector('button.revoke[data-id=%q]') && !!document.querySelector("#keys")`, k.ID))
		if st, _ := call(t, s, secret, "GET", "/v1/keys/current", nil); st != http.StatusUnauthorized {
			t.Fatalf("the revoked key: %d, want 401", st)
		}
	})

	t.Run("snapshots: listed, a sandbox started from one, deleted", func(t *testing.T) {
		b.step(t, "the snapshots page", chromedp.Click(chromedp.CSS(`#nav a[href="#/snapshots"]`)))
		row := fmt.Sprintf(`#snapshots tr[data-id=%q]`, snapID)
		b.until(t, "the snapshot listed with its sandbox", fmt.Sprintf(`!!document.querySelector('%s') && document.querySelector('%s').textContent.includes(%q)`, row, row, sbx.ID))
		b.step(t, "a narrow screen", chromedp.EmulateViewport(390, 844))
		b.shoot(t, shots, "10-snapshots-narrow")
		b.step(t, "a wide screen", chromedp.EmulateViewport(1280, 900))
		b.shoot(t, shots, "10-snapshots")
		b.step(t, "settling after the screenshot", chromedp.EmulateViewport(1280, 900))
		b.confirmClick(t, row+" button.start-from")
		b.untilFor(t, 2*time.Minute, "the new sandbox's page", `/^#\/sandboxes\//.test(location.hash) && !!document.querySelector("#sbx-state") && document.querySelector("#sbx-state").textContent === "running"`)
		started := strings.TrimPrefix(b.eval(t, `location.hash`), "#/sandboxes/")
		t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+started, nil) })
		if started == sbx.ID || started == "" {
			t.Fatalf("the page is at %q, want a new sandbox's", started)
		}
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+started, nil)
		b.step(t, "the snapshots page", chromedp.Click(chromedp.CSS(`#nav a[href="#/snapshots"]`)))
		b.until(t, "the delete button", `!!document.querySelector('`+row+` button.delete')`)
		b.confirmClick(t, row+" button.delete")
		b.until(t, "the snapshot gone from the list", `!document.querySelector('`+row+`') && !!document.querySelector("#snapshots-list")?.firstChild`)
		if st, _ := call(t, s, s.Key, "GET", "/v1/snapshots/"+snapID, nil); st != http.StatusNotFound {
			t.Fatalf("the deleted snapshot: %d, want 404", st)
		}
	})

	t.Run("volumes: create, a refusal, its files, a download, delete", func(t *testing.T) {
		b.step(t, "the volumes page", chromedp.Click(chromedp.CSS(`#nav a[href="#/volumes"]`)))
		create := func() {
			b.step(t, "creating a volume", chromedp.SetValue(chromedp.CSS("#volume-name"), "console-vol"), chromedp.SetValue(chromedp.CSS("#volume-size"), "1"), chromedp.Click(chromedp.CSS("#volume-create")))
		}
		create()
		row := `#volumes tr[data-name="console-vol"]`
		b.until(t, "the volume listed", `!!document.querySelector('`+row+`') && document.querySelector('`+row+`').textContent.includes("1 GiB")`)
		// A refusal shows its code and message: the name is taken.
		create()
		b.until(t, "the refusal", `document.querySelector("#volumes-error").dataset.code === "conflict" && document.querySelector("#volumes-error").textContent.startsWith("conflict: a volume named console-vol exists")`)
		const volBody = "a file on a volume\n"
		if st, data := call(t, s, s.Key, "PUT", "/v1/volumes/console-vol/files?path=/docs/note.txt", strings.NewReader(volBody)); st != http.StatusNoContent {
			t.Fatalf("writing a file onto the volume: %d %s", st, data)
		}
		b.shoot(t, shots, "11-volumes")
		b.step(t, "settling after the screenshot", chromedp.EmulateViewport(1280, 900))
		b.step(t, "opening the volume", chromedp.Click(chromedp.CSS(row+" a.volume-link")))
		b.until(t, "its directory", `!!document.querySelector('#volume-files button.open[data-path="/docs"]')`)
		b.step(t, "opening the directory", chromedp.Click(chromedp.CSS(`#volume-files button.open[data-path="/docs"]`)))
		b.until(t, "the file", `!!document.querySelector('#volume-files button.download[data-path="/docs/note.txt"]')`)
		b.shoot(t, shots, "12-volume-files")
		b.step(t, "settling after the screenshot", chromedp.EmulateViewport(1280, 900))
		b.step(t, "downloading", chromedp.Click(chromedp.CSS(`#volume-files button.download[data-path="/docs/note.txt"]`)))
		waitDownload(t, downloads, "note.txt", volBody)
		b.step(t, "the volumes page", chromedp.Click(chromedp.CSS(`#nav a[href="#/volumes"]`)))
		b.until(t, "the delete button", `!!document.querySelector('`+row+` button.delete')`)
		b.confirmClick(t, row+" button.delete")
		b.until(t, "the volume gone from the list", `!document.querySelector('`+row+`') && !!document.querySelector("#volumes-list")?.firstChild`)
		if st, _ := call(t, s, s.Key, "GET", "/v1/volumes/console-vol", nil); st != http.StatusNotFound {
			t.Fatalf("the deleted volume: %d, want 404", st)
		}
	})

	t.Run("a template build's live log", func(t *testing.T) {
		st, data := call(t, s, s.Key, "POST", "/v1/templates", strings.NewReader(`{"name":"console-demo:v1","dockerfile":"FROM default\nRUN echo console-build-marker\n"}`))
		var bl api.TemplateBuild
		if st != http.StatusAccepted || json.Unmarshal(data, &bl) != nil || bl.ID == "" {
			t.Fatalf("starting a build: %d %s", st, data)
		}
		b.step(t, "the templates page", chromedp.Click(chromedp.CSS(`#nav a[href="#/templates"]`)))
		b.step(t, "following the build", chromedp.SendKeys(chromedp.CSS("#build-id"), bl.ID), chromedp.Click(chromedp.CSS("#build-follow")))
		b.untilFor(t, 5*time.Minute, "the build's output and its end in the page",
			`document.querySelector("#build-log").textContent.includes("console-build-marker") && document.querySelector("#build-state").dataset.state === "succeeded"`)
		if got := b.eval(t, `location.hash`); got != "#/templates/builds/"+bl.ID {
			t.Fatalf("the page is at %q, want the build's own address", got)
		}
		b.shoot(t, shots, "09-build")
	})

	t.Run("the admin sees accounts", func(t *testing.T) {
		b.step(t, "the accounts page", chromedp.Click(chromedp.CSS(`#nav a[href="#/accounts"]`)))
		b.until(t, "the default account", `[...document.querySelectorAll("#accounts tbody tr")].some(r => r.textContent.startsWith("default"))`)
	})
}

// confirmClick clicks sel and then Confirm in the dialog it opens.
func (b *browserTab) confirmClick(t *testing.T, sel string) {
	t.Helper()
	b.step(t, "clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
	b.until(t, "the confirmation", `document.querySelector("#confirm").open`)
	b.step(t, "confirming", chromedp.Click(chromedp.CSS("#confirm-ok")))
}

// waitDownload waits up to 30 s for the browser's download of name into
// dir to hold want.
func waitDownload(t *testing.T, dir, name, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(dir)
			t.Fatalf("the download of %s: %q, %v (folder holds %v)", name, got, err, entries)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// typeText inserts text into the focused element as a keyboard's input
// event does (SendKeys' key events reach xterm.js twice: as a keydown with
// text and as a char).
func typeText(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: s})
		return err
	})
}

// keys are the keys pressKey knows: code, virtual key code and the text
// a key down gives (Enter's makes a keypress, which activates buttons).
var keys = map[string]struct {
	code string
	vk   int64
	text string
}{
	"Enter": {"Enter", 13, "\r"}, "Tab": {"Tab", 9, ""}, "Escape": {"Escape", 27, ""}, "Backspace": {"Backspace", 8, ""},
}

// pressKey presses and releases key as a keyboard does.
func pressKey(key string) chromedp.Action[chromedp.Void] {
	k := keys[key]
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeKeyDown, input.DispatchKeyEventTypeKeyUp} {
			p := input.DispatchKeyEventParams{Type: typ, Key: key, Code: k.code, WindowsVirtualKeyCode: k.vk, NativeVirtualKeyCode: k.vk}
			if typ == input.DispatchKeyEventTypeKeyDown {
				p.Text = k.text
			}
			if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// tabTo presses Tab until the focused element matches sel (at most 80
// times): what a keyboard's user does to reach it.
func (b *browserTab) tabTo(t *testing.T, sel string) {
	t.Helper()
	match := fmt.Sprintf(`document.activeElement && document.activeElement.matches(%s) ? "yes" : "no"`, jsString(sel))
	for range 80 {
		if b.eval(t, match) == "yes" {
			return
		}
		b.step(t, "Tab", pressKey("Tab"))
	}
	t.Fatalf("80 Tabs never reached %s (focus on %s)", sel, b.eval(t, `document.activeElement ? document.activeElement.outerHTML.slice(0, 120) : "nothing"`))
}

// pressEnter presses and releases Enter, which xterm.js reads off the
// keydown.
func pressEnter() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			_, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{
				Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

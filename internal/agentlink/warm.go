package agentlink

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// warmExec is the command a pool member runs once before it is ready. The
// first python3 in a sandbox costs more than any later one: the sandbox's
// kernel fills its dentry cache and file pages from the image, for every
// later start in that sandbox. It runs as the sandbox user in /, writes no
// bytecode (-B) and reads nothing of anyone's, and it has ended before the
// member can be claimed: no file, process or environment of it is left,
// and nothing ran for any user.
const warmExec = `{"cmd":["python3","-B","-c","pass"],"cwd":"/","timeout_ms":10000}`

// warmWait bounds the warm-up; a member whose warm-up fails or times out
// is handed out all the same, only without the warm caches.
const warmWait = 15 * time.Second

// WarmCaches runs the warm-up command through the agent dial reaches and
// reads its answer to the end, bounded. It is best effort: a pool member
// works without it.
func WarmCaches(ctx context.Context, dial func(context.Context) (net.Conn, error)) {
	ctx, cancel := context.WithTimeout(ctx, warmWait)
	defer cancel()
	c := oneShotClient(dial)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/exec", strings.NewReader(warmExec))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
}

// oneShotClient is an HTTP client of the host's one-off calls to the
// agent (health, warm-up, reseed): a connection per request through
// dial, and a small bound on the answer's headers.
func oneShotClient(dial func(context.Context) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 4 << 10,
	}}
}

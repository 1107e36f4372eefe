package agentlink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/api"
)

// ReseedNet is a restored microVM's own network, for backends that may
// not import the wire contract.
type ReseedNet = api.ReseedNet

// reseedWait bounds the reseed of a sandbox started from a snapshot.
const reseedWait = 10 * time.Second

// Reseed gives a sandbox started from a snapshot its own identity (the
// agent's POST /reseed) through the agent dial reaches: 64 bytes of the
// host's randomness for its kernel, and its own network where its kernel
// keeps the source's (nil: the sandbox's network is the host's doing, as
// under gVisor). It returns the agent's answer; a sandbox whose reseed
// fails must not be handed out.
func Reseed(ctx context.Context, dial func(context.Context) (net.Conn, error), nw *ReseedNet) (api.ReseedAnswer, error) {
	var ans api.ReseedAnswer
	ctx, cancel := context.WithTimeout(ctx, reseedWait)
	defer cancel()
	req := api.ReseedRequest{Entropy: make([]byte, 64), Net: nw}
	rand.Read(req.Entropy)
	body, err := json.Marshal(req)
	if err != nil {
		return ans, err
	}
	c := oneShotClient(dial)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/reseed", bytes.NewReader(body))
	if err != nil {
		return ans, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(hreq)
	if err != nil {
		return ans, fmt.Errorf("reseeding the sandbox: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return ans, fmt.Errorf("reseeding the sandbox: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("reseeding the sandbox: the agent answered %s: %s", resp.Status, data)
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return ans, fmt.Errorf("reseeding the sandbox: %w", err)
	}
	return ans, nil
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestAccountFlood has one account's key pin what it can of a real server
// with file uploads whose bodies come a byte every few seconds, more of
// them than the server has connections, while keyless clients dribble
// headers into every other slot. The account holds no more than its share
// (a quarter of --max-conns), the rest of its requests get 429
// rate_limited, health and a second account's exec answer throughout, a
// 64 MiB file goes up and back at full speed, and an upload that stops
// sending ends with invalid_request after the idle bound (30 s).
func TestAccountFlood(t *testing.T) {
	const (
		maxConns = 100
		share    = maxConns / 4 // the default per-account share
		uploads  = 150          // more than maxConns: unbounded, they would take every slot
		headers  = 300          // keyless clients dribbling headers
		// stallAfter is the server's default idle bound on a request body.
		stallAfter = 30 * time.Second
	)
	raiseFiles(t, 4*(uploads+headers)+1000)
	s := testenv.StartServer(t, "--max-conns", strconv.Itoa(maxConns))
	pid := s.Pid()
	newAccount(t, s, `{"name":"flood"}`)
	newAccount(t, s, `{"name":"other"}`)
	flood, other := newKey(t, s, `{"account":"flood"}`).Secret, newKey(t, s, `{"account":"other"}`).Secret
	floodBox, otherBox := createBox(t, s, flood), createBox(t, s, other)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	probe := func(when string) {
		t.Helper()
		if err := healthOnce(client, s.URL); err != nil {
			t.Fatalf("health %s: %v", when, err)
		}
		if err := execAs(s, other, otherBox, when); err != nil {
			t.Fatalf("the other account's exec %s: %v", when, err)
		}
	}
	probe("before the flood")

	// One upload stops after its first bytes: it takes one of the share
	// until the idle bound ends it.
	stalled := make(chan *http.Response, 1)
	stallStart := time.Now()
	go func() {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			stalled <- nil
			return
		}
		defer c.Close()
		io.WriteString(c, uploadHead(floodBox, flood, "stalled", 1000)+"0123456789")
		c.SetReadDeadline(time.Now().Add(stallAfter + 30*time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		stalled <- resp
	}()
	// Given a moment to be in progress first, it is answered only when it
	// stalled.
	time.Sleep(time.Second)
	select {
	case resp := <-stalled:
		t.Fatalf("the stalled upload was answered at once: %+v", resp)
	default:
	}

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	var dialed, shut atomic.Int64
	for range headers {
		wg.Go(func() { dribble(ctx, s.Addr, &dialed, &shut) })
	}
	up := &uploadStats{inFlight: map[int]time.Time{}}
	for i := range uploads {
		wg.Go(func() { up.run(ctx, s.Addr, uploadHead(floodBox, flood, fmt.Sprintf("f%03d", i), 1<<20)) })
	}
	floodWait(t, "the account's share to be taken", func() bool { return shareFull(t, s, flood) })

	most := 0
	for i := 0; time.Since(stallStart) < stallAfter+time.Second; i++ {
		probe(fmt.Sprintf("during the flood (%d)", i))
		most = max(most, openFiles(t, pid))
		time.Sleep(time.Duration(300+rand.IntN(400)) * time.Millisecond)
	}
	// A large file goes up and comes back whole at the speed it can.
	bigFile(t, s, other, otherBox, 64<<20)
	// The account's own requests past its share are refused, clearly.
	status, body := call(t, s, flood, "POST", "/v1/sandboxes/"+floodBox+"/exec", strings.NewReader(`{"cmd":["true"]}`))
	if status != http.StatusTooManyRequests || errorCode(body) != "rate_limited" ||
		!strings.Contains(string(body), "too many requests in progress for this account") {
		t.Errorf("the flooding account's exec: got %d %s, want 429 rate_limited: too many requests in progress for this account", status, body)
	}

	var resp *http.Response
	select {
	case resp = <-stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled upload got no answer")
	}
	waited := time.Since(stallStart)
	if resp == nil {
		t.Fatal("the stalled upload got no answer: its connection broke")
	}
	stalledBody, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || errorCode(stalledBody) != "invalid_request" ||
		!strings.Contains(string(stalledBody), "request body stalled") {
		t.Errorf("the stalled upload: got %d %s, want 400 invalid_request: request body stalled", resp.StatusCode, stalledBody)
	}

	pinned := up.pinned(5 * time.Second)
	t.Logf("flood: %d uploads in progress for 5 s or more (a byte every 2-4 s), %d refused with 429, %d shed before their headers were in, %d other answers; "+
		"%d header dribblers dialed %d times, shut %d times; the stalled upload was answered after %s; the server held at most %d descriptors",
		pinned, up.refused.Load(), up.shed.Load(), up.other.Load(),
		headers, dialed.Load(), shut.Load(), waited.Round(time.Second), most)
	// The stalled upload's place in the share was free for a moment.
	if pinned < share-1 || pinned > share {
		t.Errorf("uploads in progress: got %d, want the account's share (%d), or one less", pinned, share)
	}
	if n := up.other.Load(); n != 0 {
		t.Errorf("%d uploads got an answer other than 429 rate_limited, or were cut once in progress: %s", n, up.lastOther())
	}
	if up.refused.Load() < uploads-share {
		t.Errorf("uploads refused: got %d, want at least %d", up.refused.Load(), uploads-share)
	}
	if most > maxConns+200 {
		t.Errorf("the server held %d descriptors during the flood, want at most --max-conns (%d) and a few", most, maxConns)
	}

	stop()
	wg.Wait()
	probe("after the flood")
	floodWait(t, "the account's requests to end", func() bool { return !shareFull(t, s, flood) })
}

// bigFile uploads n bytes to sandbox id with key and downloads them again.
func bigFile(t *testing.T, s *testenv.Server, key, id string, n int) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	url := s.URL + "/v1/sandboxes/" + id + "/files?path=big.bin"
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", url, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("uploading %d bytes: %v", n, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("uploading %d bytes: got %d %s, want 200", n, resp.StatusCode, body)
	}
	req, _ = http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("downloading %d bytes: %v", n, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("downloading: got %d, %d bytes (%v), want 200 and the %d bytes uploaded", resp.StatusCode, len(got), err, n)
	}
}

// createBox creates a small sandbox with key and returns its id.
func createBox(t *testing.T, s *testenv.Server, key string) string {
	t.Helper()
	status, body := call(t, s, key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	var sb api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, s, key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	return sb.ID
}

// shareFull reports whether key's account holds its whole share of
// requests in progress: another of its requests is refused.
func shareFull(t *testing.T, s *testenv.Server, key string) bool {
	t.Helper()
	status, body := call(t, s, key, "GET", "/v1/sandboxes", nil)
	if status != http.StatusOK && errorCode(body) != "rate_limited" {
		t.Fatalf("listing sandboxes: %d %s", status, body)
	}
	return status == http.StatusTooManyRequests
}

// uploadHead is the head of a file upload of n bytes to name in sandbox
// id.
func uploadHead(id, key, name string, n int) string {
	return "PUT /v1/sandboxes/" + id + "/files?path=" + name + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}

// uploadStats counts what slow uploads were answered.
type uploadStats struct {
	// refused counts the uploads refused with 429 rate_limited; shed
	// those the server closed before their request was in (it makes room
	// for new connections); other the rest, among them any cut once in
	// progress.
	refused, shed, other atomic.Int64

	mu sync.Mutex // guards the fields below
	// inFlight holds when each upload without an answer had sent its
	// request's head.
	inFlight  map[int]time.Time
	next      int
	otherText string
}

// pinned counts the uploads that have waited at least d for an answer.
func (u *uploadStats) pinned(d time.Duration) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, at := range u.inFlight {
		if time.Since(at) >= d {
			n++
		}
	}
	return n
}

func (u *uploadStats) lastOther() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.otherText
}

// sent notes an upload that has sent its head; answered that it is over,
// and whether it was cut: closed with no answer long after it was sent.
func (u *uploadStats) sent() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next++
	u.inFlight[u.next] = time.Now()
	return u.next
}

func (u *uploadStats) answered(id int) (after time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	at := u.inFlight[id]
	delete(u.inFlight, id)
	return time.Since(at)
}

// run is one slow upload: it sends head, then a byte every two to four
// seconds, well within the idle bound, and reads what the server answers
// meanwhile. Once answered or closed, it comes back a second or two later,
// until ctx ends.
func (u *uploadStats) run(ctx context.Context, addr, head string) {
	d := net.Dialer{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if _, err := io.WriteString(c, head+"x"); err != nil {
			c.Close()
			u.shed.Add(1)
			continue
		}
		id := u.sent()
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			var body []byte
			if err == nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			}
			after := u.answered(id)
			if ctx.Err() != nil {
				return // the test ended it
			}
			switch {
			case err == nil && resp.StatusCode == http.StatusTooManyRequests && errorCode(body) == "rate_limited" &&
				strings.Contains(string(body), "too many requests in progress for this account"):
				u.refused.Add(1)
			case err != nil && after < time.Second:
				// Closed before the server read a thing: a slot was
				// needed, and a connection that has not sent its headers
				// yet may be closed for it.
				u.shed.Add(1)
			default:
				u.other.Add(1)
				u.mu.Lock()
				u.otherText = fmt.Sprintf("%v %s, %s after its head", err, body, after)
				if err == nil {
					u.otherText = fmt.Sprintf("%d %s, %s after its head", resp.StatusCode, body, after)
				}
				u.mu.Unlock()
			}
		}()
		for err == nil {
			select {
			case <-ctx.Done():
				c.Close()
				<-answered
				return
			case <-answered:
				err = io.EOF
			case <-time.After(2*time.Second + rand.N(2*time.Second)):
				_, err = c.Write([]byte("x"))
			}
		}
		c.Close()
		<-answered
		select {
		case <-ctx.Done():
		case <-time.After(time.Second + rand.N(time.Second)):
		}
	}
}

// execAs runs echo in sandbox id with key and checks its whole stream.
func execAs(s *testenv.Server, key, id, word string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/sandboxes/"+id+"/exec",
		strings.NewReader(`{"cmd":["echo",`+strconv.Quote(word)+`]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"exit_code":0`) ||
		!strings.Contains(string(out), strconv.Quote(word+"\n")) {
		return fmt.Errorf("got %d %s, want 200 with %q and exit code 0", resp.StatusCode, out, word)
	}
	return nil
}

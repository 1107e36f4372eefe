package e2bcompat

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem"
	"github.com/withruntime/withruntime/internal/e2bcompat/proto/filesystem/filesystemconnect"
)

// WatchDir over the Connect JSON codec, as the JS and async Python clients
// call it: start first, then the changes as they happen, keepalives at
// the interval asked for; a missing directory is not_found.
func TestWatchDirStream(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	ff.files["/home/user/w"] = nil
	hs := httptest.NewServer(s)
	defer hs.Close()
	hdr := mk("GET", "/", nil).Header
	c := filesystemconnect.NewFilesystemClient(hs.Client(), hs.URL, connect.WithProtoJSON())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := connect.NewRequest(&fspb.WatchDirRequest{Path: "w", IncludeEntry: true})
	for _, h := range []string{headerSandboxID, headerSandboxPort, headerAccessToken} {
		req.Header().Set(h, hdr.Get(h))
	}
	req.Header().Set("Keepalive-Ping-Interval", "1")
	stream, err := c.WatchDir(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message: got %v (%v), want start", stream.Msg(), stream.Err())
	}
	ff.mu.Lock()
	ff.files["/home/user/w/new.txt"] = []byte("n")
	ff.mu.Unlock()
	var sawKeepalive bool
	var events []string
	for (len(events) < 3 || !sawKeepalive) && stream.Receive() {
		switch m := stream.Msg(); {
		case m.GetKeepalive() != nil:
			sawKeepalive = true
		case m.GetFilesystem() != nil:
			ev := m.GetFilesystem()
			if ev.Name != "new.txt" || ev.GetEntry().GetPath() != "/home/user/w/new.txt" {
				t.Errorf("event: got %v, want new.txt with its entry", ev)
			}
			events = append(events, ev.Type.String())
		}
	}
	sawEvent := len(events) == 3
	// A new file, one by one, as envd counts an upload.
	if want := "EVENT_TYPE_CREATE,EVENT_TYPE_CHMOD,EVENT_TYPE_WRITE"; strings.Join(events, ",") != want {
		t.Errorf("events: got %v, want %s", events, want)
	}
	if !sawEvent || !sawKeepalive {
		t.Errorf("got event %v, keepalive %v (%v), want both", sawEvent, sawKeepalive, stream.Err())
	}

	req = connect.NewRequest(&fspb.WatchDirRequest{Path: "nowhere"})
	for _, h := range []string{headerSandboxID, headerSandboxPort, headerAccessToken} {
		req.Header().Set(h, hdr.Get(h))
	}
	missing, err := c.WatchDir(ctx, req)
	if err == nil {
		for missing.Receive() {
		}
		err = missing.Err()
		missing.Close()
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("watching a missing directory: got %v, want not_found", err)
	}
}

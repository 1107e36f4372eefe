package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// meter is a ReserveFunc with a cap: it records what is held by sandbox
// and the most ever held, and refuses past cap with an *APIError as a
// server's budget would.
type meter struct {
	mu      sync.Mutex
	cap     int64
	held    int64
	peak    int64
	ids     map[string]bool
	refused int
}

var errMeterFull = &APIError{Code: CodeRateLimited, Status: http.StatusTooManyRequests, Message: "budget spent"}

func (m *meter) reserve(_ context.Context, id string, n int64) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held+n > m.cap {
		m.refused++
		return nil, errMeterFull
	}
	m.held += n
	m.peak = max(m.peak, m.held)
	if m.ids == nil {
		m.ids = map[string]bool{}
	}
	m.ids[id] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.held -= n
			m.mu.Unlock()
		})
	}, nil
}

func (m *meter) state() (held, peak int64, refused int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held, m.peak, m.refused
}

// reservingClient serves h and returns a client of it reserving through m.
func reservingClient(t *testing.T, h http.Handler, m *meter) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(WithBaseURL(srv.URL), WithAPIKey(testKey), WithReserve(m.reserve))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A file's description over 64 KiB is refused, announced or streamed, and
// never held whole.
func TestStatAnswerBound(t *testing.T) {
	info := func(pathLen int) string {
		return fmt.Sprintf(`{"name":"a","path":"/%s","type":"file","size":1,"mode":420,"mtime":"2026-01-01T00:00:00Z"}`, strings.Repeat("p", pathLen))
	}
	for _, tt := range []struct {
		name     string
		body     string
		chunked  bool
		tooLarge bool
	}{
		{"ordinary", info(100), false, false},
		{"long names near the bound", info(maxInfoBody - 200), true, false},
		{"announced over the bound", info(maxInfoBody), false, true},
		{"streamed over the bound", info(8 << 20), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &meter{cap: 1 << 30}
			c := reservingClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if !tt.chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(tt.body)))
				}
				for b := tt.body; b != ""; {
					n := min(len(b), 16<<10)
					w.Write([]byte(b[:n]))
					w.(http.Flusher).Flush()
					b = b[n:]
				}
			}), m)
			fi, err := c.StatFile(t.Context(), "sbx-1", "/a")
			_, peak, _ := m.state()
			if tt.tooLarge {
				var te *TransportError
				if !errors.As(err, &te) || !errors.Is(err, errAnswerTooLarge) {
					t.Fatalf("got %v, want a *TransportError for an answer too large", err)
				}
			} else if err != nil || fi.Name != "a" {
				t.Fatalf("got %v %v, want the file's description", fi, err)
			}
			// While the buffer grows to the bound, the half-size one is
			// held too.
			if limit := int64(jsonHoldFactor * (maxInfoBody + maxInfoBody/2)); peak > limit {
				t.Errorf("peak reserved: got %d, want at most %d", peak, limit)
			}
			if held, _, _ := m.state(); held != 0 {
				t.Errorf("held after the call: got %d, want 0", held)
			}
		})
	}
}

// A listing past the reservation's cap fails with the ReserveFunc's own
// error, having held no more than the cap; one within it passes, and
// everything is given back.
func TestReserveBoundsJSONAnswers(t *testing.T) {
	entry := `{"name":"f","path":"/w/f","type":"file","size":1,"mode":420,"mtime":"2026-01-01T00:00:00Z"},`
	listing := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"entries":[`))
			chunk := strings.Repeat(entry, 1000)
			for i := 0; i < n; i += 1000 {
				if _, err := w.Write([]byte(chunk)); err != nil {
					return
				}
			}
			w.Write([]byte(entry[:len(entry)-1] + `]}`))
		}
	}
	for _, tt := range []struct {
		name    string
		entries int
		wantErr bool
	}{
		{"small", 1000, false},
		{"past the cap", 100_000, true}, // about 9.5 MB
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &meter{cap: 8 << 20}
			c := reservingClient(t, listing(tt.entries), m)
			l, err := c.ListFiles(t.Context(), "sbx-1", "/w")
			if tt.wantErr {
				if !errors.Is(err, errMeterFull) {
					t.Fatalf("got %v, want the meter's refusal", err)
				}
			} else if err != nil || len(l) != tt.entries+1 {
				t.Fatalf("got %d entries, %v, want %d", len(l), err, tt.entries+1)
			}
			held, peak, _ := m.state()
			if held != 0 || peak > m.cap {
				t.Errorf("held %d after, peak %d: want 0 and at most %d", held, peak, m.cap)
			}
			if !m.ids["sbx-1"] {
				t.Errorf("reservations named %v, want sbx-1", m.ids)
			}
		})
	}
}

// A code stream's long lines are reserved as they grow and given back,
// the last one when the stream ends; a line past the cap ends the call
// with the ReserveFunc's error.
func TestReserveBoundsCodeLines(t *testing.T) {
	line := strings.Repeat("x", 3<<20)
	for _, tt := range []struct {
		name    string
		cap     int64
		wantErr bool
	}{
		{"within", 16 << 20, false},
		{"past the cap", 4 << 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &meter{cap: tt.cap}
			c := reservingClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				streamCode(w, api.CodeEvent{Type: "stdout", Text: line}, api.CodeEvent{Type: "stdout", Text: line}, api.CodeEvent{Type: "end", ExecutionCount: 1})
			}), m)
			var got int
			_, err := c.RunCode(t.Context(), "sbx-1", api.CodeRequest{Code: "1"}, CodeOptions{Stdout: func(s string) { got += len(s) }, Discard: true})
			if tt.wantErr != (err != nil) || (tt.wantErr && !errors.Is(err, errMeterFull)) {
				t.Fatalf("got %v, want error %v (the meter's)", err, tt.wantErr)
			}
			if !tt.wantErr && got != 2*len(line) {
				t.Errorf("stdout: got %d bytes, want %d", got, 2*len(line))
			}
			held, peak, _ := m.state()
			if held != 0 {
				t.Errorf("held after the call: got %d, want 0", held)
			}
			if !tt.wantErr && peak < int64(len(line)) {
				t.Errorf("peak: got %d, want at least a line's %d", peak, len(line))
			}
		})
	}
}

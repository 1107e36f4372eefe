package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal: what a program writes to tty shows on the
// terminal, read from master; what is written to master is typed.
type pty struct {
	master, tty *os.File

	mu   sync.Mutex
	seen bytes.Buffer // everything the terminal showed
}

func openPty(t *testing.T) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, tty: tty}
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.seen.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); m.Close() })
	return p
}

// shown is what the terminal has shown so far.
func (p *pty) shown() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.String()
}

// waitFor waits until the terminal shows want.
func (p *pty) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.shown(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it shows %q", want, p.shown())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// echoes reports whether the terminal echoes what is typed.
func (p *pty) echoes(t *testing.T) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(p.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ECHO != 0
}

// From a terminal, "secrets set" asks for the value and reads it without
// showing it, as docker login does, and the echo comes back afterwards.
func TestSecretsSetPromptsOnATerminal(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	p := openPty(t)
	if !p.echoes(t) {
		t.Fatal("a new terminal does not echo")
	}

	type result struct {
		code   int
		stdout string
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := (&App{}).Main([]string{"secrets", "set", "OPENAI_API_KEY", "--host", "api.openai.com"}, p.tty, &out, p.tty)
		done <- result{code, out.String()}
	}()
	p.waitFor(t, "Value of OPENAI_API_KEY (sent only to api.openai.com; not shown as you type): ")
	if p.echoes(t) {
		t.Error("the terminal echoes while the value is typed")
	}
	p.master.WriteString(secretValue + "\r")
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("secrets set still waits after the value was typed; the terminal shows %q", p.shown())
	}
	if r.code != 0 || r.stdout != "" {
		t.Errorf("exit %d stdout %q; the terminal shows %q", r.code, r.stdout, p.shown())
	}
	f.mu.Lock()
	values := slices.Clone(f.secretValues)
	f.mu.Unlock()
	if want := []string{secretValue}; !reflect.DeepEqual(values, want) {
		t.Errorf("stored %q, want %q", values, want)
	}
	time.Sleep(100 * time.Millisecond) // what the terminal shows settles
	if strings.Contains(p.shown(), secretValue) {
		t.Errorf("the terminal showed the value: %q", p.shown())
	}
	if !p.echoes(t) {
		t.Error("the terminal no longer echoes after the value was read")
	}
}

// Ctrl-C at the prompt (the signal ends the command's context) gives the
// terminal its echo back.
func TestSecretPromptInterruptedRestoresEcho(t *testing.T) {
	p := openPty(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := promptSecret(ctx, p.tty, p.tty, "Value: ")
		done <- err
	}()
	p.waitFor(t, "Value: ")
	if p.echoes(t) {
		t.Error("the terminal echoes at the prompt")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt still waits after its context ended")
	}
	if !p.echoes(t) {
		t.Error("the terminal no longer echoes after the prompt was interrupted")
	}
}

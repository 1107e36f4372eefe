package membudget

import (
	"errors"
	"sync"
	"testing"
)

func TestLevels(t *testing.T) {
	b, err := NewWith(Limits{Total: 100, Account: 25, Sandbox: 10})
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		name             string
		account, sandbox string
		n                int64
		want             error // nil, ErrShare or ErrCapacity
		level            Level
	}
	var held []func()
	for _, s := range []step{
		{name: "a/1 fits", account: "a", sandbox: "1", n: 10},
		{name: "a/1 past its sandbox", account: "a", sandbox: "1", n: 1, want: ErrShare, level: LevelSandbox},
		{name: "a/2 fits", account: "a", sandbox: "2", n: 10},
		{name: "a/3 past the account", account: "a", sandbox: "3", n: 10, want: ErrShare, level: LevelAccount},
		{name: "a without sandbox fits the account", account: "a", n: 5},
		{name: "b/1", account: "b", sandbox: "1", n: 10},
		{name: "b/2", account: "b", sandbox: "2", n: 10},
		{name: "c/1", account: "c", sandbox: "1", n: 10},
		{name: "c/2", account: "c", sandbox: "2", n: 10},
		{name: "d/1", account: "d", sandbox: "1", n: 10},
		{name: "d/2", account: "d", sandbox: "2", n: 10},
		{name: "e/1", account: "e", sandbox: "1", n: 10},
		{name: "f/1 past the server", account: "f", sandbox: "1", n: 10, want: ErrCapacity, level: LevelServer},
		{name: "f/1 what is left", account: "f", sandbox: "1", n: 5},
	} {
		rel, err := b.Acquire(s.account, s.sandbox, s.n)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
		var e *Error
		if s.want != nil && (!errors.As(err, &e) || e.Level != s.level) {
			t.Fatalf("%s: got %v, want level %s", s.name, err, s.level)
		}
		if err == nil {
			held = append(held, rel)
		}
	}
	if used, _, _ := b.Used("", ""); used != 100 {
		t.Errorf("used: got %d, want 100", used)
	}
	for _, rel := range held {
		rel()
		rel() // twice gives back once
	}
	if used, a, s := b.Used("a", "1"); used != 0 || a != 0 || s != 0 || len(b.byAccount) != 0 || len(b.bySandbox) != 0 {
		t.Errorf("after release: got %d %d %d, maps %v %v, want all zero and empty", used, a, s, b.byAccount, b.bySandbox)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"defaults", LimitsFor(DefaultTotal), true},
		{"zero", Limits{}, false},
		{"account over a quarter", Limits{Total: 100, Account: 26, Sandbox: 1}, false},
		{"sandbox over account", Limits{Total: 100, Account: 10, Sandbox: 11}, false},
	} {
		if err := c.l.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: got %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestHold(t *testing.T) {
	b := New(800) // account 200, sandbox 100
	h := b.Hold("a", "1")
	for _, c := range []struct {
		to, want int64
		fails    bool
	}{{50, 50, false}, {100, 100, false}, {101, 100, true}, {20, 20, false}, {0, 0, false}} {
		err := h.Resize(c.to)
		if (err != nil) != c.fails || h.Held() != c.want {
			t.Errorf("Resize(%d): got %v, held %d, want fails %v, held %d", c.to, err, h.Held(), c.fails, c.want)
		}
		if _, _, s := b.Used("a", "1"); s != c.want {
			t.Errorf("Resize(%d): sandbox count %d, want %d", c.to, s, c.want)
		}
	}
	var nilBudget *Budget
	if err := nilBudget.Hold("a", "1").Resize(1 << 40); err != nil {
		t.Errorf("nil budget: got %v, want no bound", err)
	}
}

// Many goroutines reserving and releasing never leave the total above its
// bound nor counts behind.
func TestConcurrent(t *testing.T) {
	b := New(1 << 20)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acct := string(rune('a' + i%8))
			for range 500 {
				if rel, err := b.Acquire(acct, string(rune('0'+i%3)), 4096); err == nil {
					if used, _, _ := b.Used("", ""); used > 1<<20 {
						t.Errorf("used %d over the total", used)
					}
					rel()
				}
			}
		}()
	}
	wg.Wait()
	if used, _, _ := b.Used("", ""); used != 0 {
		t.Errorf("used after all released: got %d, want 0", used)
	}
}

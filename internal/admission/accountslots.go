package admission

import (
	"sync"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// AccountSlots counts requests in progress that no connection of their
// own holds (in-process requests: MCP's tool calls, the E2B layer's) by
// account, each account within its share, as the Listener counts direct
// ones. The zero value is ready.
type AccountSlots struct {
	mu   sync.Mutex
	held map[string]int
}

// Take takes one of account's slots, unless it holds share already.
func (m *AccountSlots) Take(account string, share int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[account] >= share {
		return false
	}
	if m.held == nil {
		m.held = map[string]int{}
	}
	m.held[account]++
	return true
}

// Give gives back one of account's slots.
func (m *AccountSlots) Give(account string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[account]--; m.held[account] <= 0 {
		delete(m.held, account)
	}
}

// TooManyInProgress is the refusal of a request past its account's share
// (rate_limited).
func TooManyInProgress(share int) error {
	return sandbox.Errorf(sandbox.KindRateLimited,
		"too many requests in progress for this account: at most %d at once; try again when some have ended", share)
}

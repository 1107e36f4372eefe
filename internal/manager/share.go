package manager

import (
	"context"
	"fmt"
	"math"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Admission hands out shares, not only the host. Trial accounts, which a
// keyless client can obtain, together hold at most Config.TrialHostShare
// of what admission hands out (the host's vCPUs, memory and free disk
// times the overcommit ratio, each on its own): past it a trial's create
// is refused with capacity_exhausted while other accounts still create.
// Every account but Config.AdminAccount holds at most
// Config.AccountHostShare of it (1 by default: none, so that a single
// user fills their own machine). Pool members are nobody's until claimed;
// a claim is checked against the claimer's shares as a create is.

// tenant is who a sandbox is admitted for: its account ("" for a pool
// member) and whether that is a trial account.
type tenant struct {
	account string
	trial   bool
}

// tenantOf is the tenant of account a, as the store holds it.
func tenantOf(a store.Account) tenant {
	return tenant{account: a.ID, trial: a.TrialSeconds > 0}
}

// tenantIn is the tenant of account as the store says now: for a
// sandbox counted again after a restart or an undone pause. An account
// the store cannot read counts as a trial, so that the trials' share holds
// (logged); one it does not hold is not one.
func (m *Manager) tenantIn(ctx context.Context, account string) tenant {
	a, err := m.account(ctx, account)
	if err != nil {
		m.cfg.Logger.Warn("reading an account to count its sandbox; counted as a trial's", "account", account, "err", err)
		return tenant{account: account, trial: true}
	}
	a.ID = account
	return tenantOf(a)
}

// room is an amount of what admission hands out: vCPUs, and MiB of
// memory and of disk quotas.
type room struct{ cpus, mem, disk float64 }

func roomOf(spec sandbox.Spec) room {
	return room{float64(spec.VCPUs), float64(spec.MemoryMiB), float64(spec.DiskMiB)}
}

func (r room) plus(o room) room { return room{r.cpus + o.cpus, r.mem + o.mem, r.disk + o.disk} }

func (r room) times(f float64) room { return room{r.cpus * f, r.mem * f, r.disk * f} }

func (r room) within(o room) bool { return r.cpus <= o.cpus && r.mem <= o.mem && r.disk <= o.disk }

// hostRoom is what admission hands out in all, given the data dir's free
// bytes (-1: unknown, so disk is not bounded).
func (m *Manager) hostRoom(free int64) room {
	r := room{float64(m.cfg.HostCPUs), float64(m.cfg.HostMemoryMiB), math.Inf(1)}
	if free >= 0 {
		r.disk = float64(free >> 20)
	}
	return r.times(m.cfg.Overcommit)
}

// checkShares refuses t a sandbox of spec when, with it, the trial
// accounts together or t's account would hold more than their share of
// host. skip is not counted (a pool member being claimed: spec is its
// size). The caller holds m.mu.
func (m *Manager) checkShares(t tenant, spec sandbox.Spec, host room, skip *entry) error {
	bounded := m.cfg.AccountHostShare > 0 && m.cfg.AccountHostShare < 1 && t.account != m.cfg.AdminAccount
	if t.account == "" || !t.trial && !bounded {
		return nil
	}
	var trials, own room
	for _, o := range m.live {
		if o == skip {
			continue
		}
		held := room{float64(o.vcpus), float64(o.memoryMiB), float64(o.diskMiB)}
		if o.trial {
			trials = trials.plus(held)
		}
		if o.account == t.account {
			own = own.plus(held)
		}
	}
	need := roomOf(spec)
	if most := host.times(m.cfg.TrialHostShare); t.trial && !trials.plus(need).within(most) {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"this host's capacity for trial accounts is full: trial sandboxes hold %s (other accounts still create); try again later",
			heldOf(trials, most))
	}
	if most := host.times(m.cfg.AccountHostShare); bounded && !own.plus(need).within(most) {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"account %s holds all of this host it may: its sandboxes hold %s; stop one first",
			t.account, heldOf(own, most))
	}
	return nil
}

// heldOf says how much of most held holds, as a refusal names it.
func heldOf(held, most room) string {
	s := fmt.Sprintf("%.0f of %.0f vCPUs, %.0f of %.0f MiB of memory", held.cpus, most.cpus, held.mem, most.mem)
	if !math.IsInf(most.disk, 1) {
		s += fmt.Sprintf(" and %.0f of %.0f MiB of disk quotas", held.disk, most.disk)
	}
	return s
}

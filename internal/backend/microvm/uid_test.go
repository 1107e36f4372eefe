package microvm

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

func TestPickUIDSkipsTakenUsers(t *testing.T) {
	const id = "sbx_uidprobe01"
	own := uidBase + uidSlot(id)
	if got, err := pickUID(id, func(int) bool { return false }); err != nil || got != own {
		t.Fatalf("nothing taken: got %d %v, want the id's slot %d", got, err, own)
	}
	taken := map[int]bool{own: true, own + 1: true}
	if got, err := pickUID(id, func(u int) bool { return taken[u] }); err != nil || got != own+2 {
		t.Fatalf("two taken: got %d %v, want %d", got, err, own+2)
	}
	if _, err := pickUID(id, func(int) bool { return true }); err == nil {
		t.Fatal("every user taken: got one, want an error")
	}
}

// A process of the host running as the id's user (another sandbox's
// QEMU whose id hashes alike) is seen, so the probe moves on.
func TestUIDsInUseSeesOtherProcesses(t *testing.T) {
	testenv.RequiresRoot(t)
	const id = "sbx_uidprobe02"
	uid := uidBase + uidSlot(id)
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	used, err := uidsInUse()
	if err != nil {
		t.Fatal(err)
	}
	if !used[uid] {
		t.Fatalf("a process running as %d is not seen", uid)
	}
	if got, err := pickUID(id, func(u int) bool { return used[u] }); err != nil || got == uid {
		t.Fatalf("got %d %v, want another user than the taken %d", got, err, uid)
	}
}

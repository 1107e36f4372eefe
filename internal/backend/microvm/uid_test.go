package microvm

import (
	"bufio"
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

	// A process that made itself non-dumpable (as a compromised QEMU can)
	// may have its /proc files owned by root; its real user, from its
	// status, is still seen.
	hidden := uid + 7
	py := exec.Command("/usr/bin/python3", "-c", "import ctypes, sys, time; ctypes.CDLL(None).prctl(4, 0); print('ready', flush=True); time.sleep(30)")
	py.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(hidden), Gid: uint32(hidden)}}
	out, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { py.Process.Kill(); py.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the non-dumpable process said %q", line)
	}
	if used, err = uidsInUse(); err != nil || !used[hidden] {
		t.Fatalf("a non-dumpable process running as %d is not seen (%v)", hidden, err)
	}
}

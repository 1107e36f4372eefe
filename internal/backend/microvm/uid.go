package microvm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// QEMU runs as an unprivileged user of its own, from a range no Debian
// installation hands out, so that one QEMU cannot signal or trace another.
// A sandbox's user is its id's hash slot, or the next slot when a process
// of the host already runs as that one (an id hashing alike, on this
// server or another): two QEMUs never share a user. The user picked is
// kept in the run dir for the checks of a later server.
const (
	uidBase  = 1_800_000_000
	uidSlots = 100_000_000
	// uidTries bounds the probe: that many users in a row all taken means
	// something other than hash collisions.
	uidTries = 64
)

// launchMu makes picking a user and starting QEMU as it one step, so that
// two creates of this process cannot pick the same free user.
var launchMu sync.Mutex

func uidSlot(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uidSlots)
}

// pickUID is the first user, from id's slot on, that inUse refuses.
func pickUID(id string, inUse func(uid int) bool) (int, error) {
	slot := uidSlot(id)
	for i := range uidTries {
		uid := uidBase + (slot+i)%uidSlots
		if !inUse(uid) {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no free QEMU user near slot %d: %d in a row are taken", slot, uidTries)
}

// uidsInUse are the real users of the host's processes.
func uidsInUse() (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, e := range entries {
		if uid, ok := procUID(e.Name()); ok {
			used[uid] = true
		}
	}
	return used, nil
}

// procUID is the real user of process pid, from its status: the owner of
// /proc/<pid> is root for a process that made itself non-dumpable, which
// a compromised QEMU can.
func procUID(pid string) (int, bool) {
	if _, err := strconv.Atoi(pid); err != nil {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[0])
			return uid, err == nil
		}
	}
	return 0, false
}

func uidFile(p paths) string { return p.run + "/qemu.uid" }

func writeUID(p paths, uid int) error {
	return os.WriteFile(uidFile(p), []byte(strconv.Itoa(uid)), 0o600)
}

// recordedUID is the user the sandbox's last QEMU was started as. A QEMU
// started before users were recorded ran as its id's slot.
func recordedUID(p paths, id string) (int, error) {
	data, err := os.ReadFile(uidFile(p))
	if errors.Is(err, fs.ErrNotExist) {
		return uidBase + uidSlot(id), nil
	}
	if err != nil {
		return 0, err
	}
	uid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || uid < uidBase || uid >= uidBase+uidSlots {
		return 0, errors.New("bad QEMU user on record")
	}
	return uid, nil
}

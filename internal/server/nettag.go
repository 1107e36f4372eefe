package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/withruntime/withruntime/internal/network"
)

// A data dir's network tag names its nft table ("withruntime_<tag>") and
// the host ends of its sandboxes' veths ("w<tag><end of the id>", at most
// 15 bytes): three characters of [0-9a-z] (network.Config), which leaves
// eleven for the id. Three characters derived from a hash of the data dir
// can collide (1 in 46,656 per pair), and two data dirs with one tag would
// share a table and sweep each other's veths. So the tag is allocated,
// not derived: kept in the data dir (tagFile) once chosen, and claimed
// host-wide in tagDir, where tagDir/<tag> names the data dir holding it.
// A candidate is free when no other data dir's claim stands (its data dir
// still says that tag), no nft table has its name and no interface starts
// with "w<tag>" (a table left by a server of an older version, or a
// host's "wlan0" for "lan").
const (
	tagFile = "network-tag"
	tagLen  = 3
)

// tagDir holds the claims; hostTaken reads the host's tables and
// interfaces; removeLeft deletes a gone data dir's table and veths.
// Tests replace all three.
var (
	tagDir     = "/run/withruntime/network-tags"
	hostTaken  = takenTags
	removeLeft = network.Remove
)

// networkTag returns the data dir's tag, allocating and claiming one the
// first time.
func networkTag(dataDir string, log *slog.Logger) (string, error) {
	unlock, err := lockTags()
	if err != nil {
		// Not root: no packet rules either, so nothing to collide.
		log.Warn("network tags cannot be claimed", "err", err)
		unlock = func() {}
	}
	defer unlock()
	sweepGone(log)
	mine, err := os.ReadFile(filepath.Join(dataDir, tagFile))
	switch {
	case err == nil && validTag(string(bytes.TrimSpace(mine))):
		tag := string(bytes.TrimSpace(mine))
		if owner := claimant(tag); owner == "" || owner == dataDir {
			return tag, claim(tag, dataDir)
		}
		log.Warn("network tag held by another data dir: choosing another", "tag", tag, "holder", claimant(tag))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading the network tag: %w", err)
	}
	taken := hostTaken()
	for i := 0; i < 10000; i++ {
		tag := candidateTag(dataDir, i)
		if claimant(tag) != "" {
			continue
		}
		// The first candidate is what versions before allocation derived:
		// a table or veths of that name are this data dir's own, from
		// then. Only another kind of interface rules it out.
		if i == 0 && !taken.foreignIf[tag] || !taken.any(tag) {
			if err := os.WriteFile(filepath.Join(dataDir, tagFile), []byte(tag+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("writing the network tag: %w", err)
			}
			return tag, claim(tag, dataDir)
		}
	}
	return "", errors.New("no free network tag on this host")
}

// candidateTag is the i-th tag tried for dataDir: the first three
// characters of a hash, as versions before allocation used for i = 0.
func candidateTag(dataDir string, i int) string {
	in := dataDir
	if i > 0 {
		in = fmt.Sprintf("%s\x00%d", dataDir, i)
	}
	sum := sha256.Sum256([]byte(in))
	if i == 0 {
		return hex.EncodeToString(sum[:])[:tagLen]
	}
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	n := binary.BigEndian.Uint64(sum[:8])
	tag := make([]byte, tagLen)
	for k := range tag {
		tag[k] = alphabet[n%36]
		n /= 36
	}
	return string(tag)
}

func validTag(tag string) bool {
	if len(tag) != tagLen {
		return false
	}
	for _, r := range tag {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}

// lockTags serializes allocation among the servers starting on the host.
func lockTags() (func(), error) {
	if err := os.MkdirAll(tagDir, 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", tagDir, err)
	}
	f, err := os.OpenFile(tagDir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the network tags: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the network tags: %w", err)
	}
	return func() { f.Close() }, nil
}

// claimant is the data dir whose claim on tag stands, or "": a claim
// stands while its data dir's tag file still says tag.
func claimant(tag string) string {
	owner, err := os.ReadFile(filepath.Join(tagDir, tag))
	if err != nil {
		return ""
	}
	dir := string(bytes.TrimSpace(owner))
	theirs, err := os.ReadFile(filepath.Join(dir, tagFile))
	if err != nil || string(bytes.TrimSpace(theirs)) != tag {
		return ""
	}
	return dir
}

// sweepGone removes, with its claim, the table and veths of every tag
// whose data dir no longer exists: no server can come back for them, and
// they would keep the tag taken and its sandboxes' addresses routed.
// A data dir that exists but says another tag (a copy, a restore) keeps
// its table: a server of it may still run somewhere.
func sweepGone(log *slog.Logger) {
	entries, err := os.ReadDir(tagDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		tag := e.Name()
		if !validTag(tag) {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(tagDir, tag))
		if err != nil {
			continue
		}
		dir := string(bytes.TrimSpace(owner))
		if _, err := os.Stat(dir); dir == "" || !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := removeLeft(tag); err != nil {
			log.Warn("removing the network of a gone data dir", "tag", tag, "data_dir", dir, "err", err)
			continue
		}
		os.Remove(filepath.Join(tagDir, tag))
	}
}

func claim(tag, dataDir string) error {
	if _, err := os.Stat(tagDir); err != nil {
		return nil // see networkTag: unclaimable, and nothing to claim against
	}
	path := filepath.Join(tagDir, tag)
	if err := os.WriteFile(path+".tmp", []byte(dataDir+"\n"), 0o600); err != nil {
		return fmt.Errorf("claiming network tag %s: %w", tag, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("claiming network tag %s: %w", tag, err)
	}
	return nil
}

// taken is what the host already has under tags' names.
type taken struct {
	table, vethIf, foreignIf map[string]bool
}

func (t taken) any(tag string) bool { return t.table[tag] || t.vethIf[tag] || t.foreignIf[tag] }

// takenTags reads the nft tables and the interfaces. What cannot be read
// counts as nothing: the claims still keep servers of this version apart.
func takenTags() taken {
	t := taken{table: map[string]bool{}, vethIf: map[string]bool{}, foreignIf: map[string]bool{}}
	if out, err := exec.Command(nftPath(), "list", "tables").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "table" && strings.HasPrefix(f[2], "withruntime_") {
				t.table[strings.TrimPrefix(f[2], "withruntime_")] = true
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if len(i.Name) < 1+tagLen || i.Name[0] != 'w' {
			continue
		}
		tag := i.Name[1 : 1+tagLen]
		if isVeth(i.Name) {
			t.vethIf[tag] = true
		} else {
			t.foreignIf[tag] = true
		}
	}
	return t
}

// isVeth reports whether interface name is a veth, as the sandboxes'
// host ends are.
func isVeth(name string) bool {
	l, err := netlink.LinkByName(name)
	return err == nil && l.Type() == "veth"
}

func nftPath() string {
	if p, err := exec.LookPath("nft"); err == nil {
		return p
	}
	return "/usr/sbin/nft"
}

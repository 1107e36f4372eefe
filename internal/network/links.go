package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
)

// linkFile is where a sandbox's link is kept in its state dir, for a
// restarted server to adopt.
const linkFile = "link.json"

// Links are the links of one backend's sandboxes: in memory, and each in
// its sandbox's state dir. A nil *Links is a backend without network:
// every call is a no-op, and nothing is found.
type Links struct {
	p *Plumbing

	mu sync.Mutex // guards m
	m  map[string]Link
}

// NewLinks keeps links attached through p (nil p: no network).
func NewLinks(p *Plumbing) *Links {
	if p == nil {
		return nil
	}
	return &Links{p: p, m: map[string]Link{}}
}

// Plumbing is the plumbing the links are attached through.
func (ls *Links) Plumbing() *Plumbing {
	if ls == nil {
		return nil
	}
	return ls.p
}

// Attach wires sandbox id's namespace at nsPath, online or not, and
// keeps the link in dir. On error nothing is left.
func (ls *Links) Attach(id, nsPath, dir string, online bool) (Link, error) {
	l, err := ls.p.Attach(id, nsPath)
	if err != nil {
		return Link{}, fmt.Errorf("wiring the network: %w", err)
	}
	if err := ls.p.SetOnline(l, online); err != nil {
		ls.p.Detach(l)
		return Link{}, err
	}
	data, _ := json.Marshal(l)
	if err := os.WriteFile(filepath.Join(dir, linkFile), data, 0o600); err != nil {
		ls.p.Detach(l)
		return Link{}, err
	}
	ls.mu.Lock()
	ls.m[id] = l
	ls.mu.Unlock()
	return l, nil
}

// ReadLink loads the link kept in dir.
func ReadLink(dir string) (Link, error) {
	var l Link
	data, err := os.ReadFile(filepath.Join(dir, linkFile))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(data, &l)
}

// Adopt takes over the link kept in dir of a sandbox an earlier server
// started. A sandbox made without a link is an error wrapping
// os.ErrNotExist.
func (ls *Links) Adopt(id, dir string) error {
	if ls == nil {
		return nil
	}
	l, err := ReadLink(dir)
	if err != nil {
		return fmt.Errorf("reading the sandbox's link: %w", err)
	}
	if err := ls.p.Adopt(l); err != nil {
		return err
	}
	ls.mu.Lock()
	ls.m[id] = l
	ls.mu.Unlock()
	return nil
}

// Detach removes sandbox id's link, the one in memory or else the one
// kept in dir, if it has one.
func (ls *Links) Detach(id, dir string) error {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	l, ok := ls.m[id]
	delete(ls.m, id)
	ls.mu.Unlock()
	if !ok {
		var err error
		if l, err = ReadLink(dir); errors.Is(err, os.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
	}
	err := ls.p.Detach(l)
	os.Remove(filepath.Join(dir, linkFile))
	return err
}

// Get returns sandbox id's link.
func (ls *Links) Get(id string) (Link, bool) {
	if ls == nil {
		return Link{}, false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.m[id]
	return l, ok
}

// Addr is sandbox id's address, for the egress services.
func (ls *Links) Addr(id string) (netip.Addr, bool) {
	l, ok := ls.Get(id)
	return l.SandboxAddr, ok
}

// SetOnline lets sandbox id send, or drops all it sends.
func (ls *Links) SetOnline(id string, online bool) error {
	l, ok := ls.Get(id)
	if !ok {
		return fmt.Errorf("sandbox %s has no network link", id)
	}
	return ls.p.SetOnline(l, online)
}

// Len is how many links are kept.
func (ls *Links) Len() int {
	if ls == nil {
		return 0
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.m)
}

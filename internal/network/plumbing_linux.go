package network

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
)

// Plumbing is one server's share of the host's network: its nft table and
// the veths of its sandboxes.
type Plumbing struct {
	cfg Config

	mu    sync.Mutex // guards slots
	slots *slots
}

// Install (re)writes the server's nft table in one transaction and returns
// the plumbing to attach sandboxes with. It is idempotent: a restarting
// server calls it again, and sandboxes that were online stay online.
func Install(cfg Config) (*Plumbing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Pool = cfg.pool()
	if err := nft(cfg.ruleset()); err != nil {
		return nil, fmt.Errorf("installing table %s: %w", cfg.table(), err)
	}
	return &Plumbing{cfg: cfg, slots: newSlots(cfg.Pool)}, nil
}

// Uninstall removes every veth of this server and then its table. It is
// for a server that goes away for good (a restart calls Install again):
// a veth left without the table would route a sandbox wherever the host
// routes.
func (p *Plumbing) Uninstall() error {
	if err := p.Sweep(func(string) bool { return false }); err != nil {
		return err
	}
	if err := nft(p.cfg.dropTable()); err != nil {
		return fmt.Errorf("deleting table %s: %w", p.cfg.table(), err)
	}
	return nil
}

// SetOnline lets the sandbox of l send (to the proxy and the resolver) or
// drops every packet it sends. A sandbox is offline after Attach.
func (p *Plumbing) SetOnline(l Link, online bool) error {
	link, err := p.hostEnd(l.HostIf)
	if err != nil {
		return err
	}
	group := 0
	if online {
		group = onlineGroup
	}
	if err := netlink.LinkSetGroup(link, group); err != nil {
		return fmt.Errorf("setting group of %s: %w", l.HostIf, err)
	}
	return nil
}

// Sweep deletes this server's veths whose host end keep refuses, and
// frees their addresses.
func (p *Plumbing) Sweep(keep func(hostIf string) bool) error {
	links, err := linkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	var errs []error
	for _, link := range links {
		name := link.Attrs().Name
		if !strings.HasPrefix(name, p.cfg.ifPrefix()) || link.Type() != "veth" || keep(name) {
			continue
		}
		addrs, _ := addrList(link, netlink.FAMILY_V4)
		if err := netlink.LinkDel(link); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", name, err))
			continue
		}
		var freed []netip.Prefix
		p.mu.Lock()
		for _, a := range addrs {
			if pfx, ok := prefixOf(a); ok && p.cfg.Pool.Overlaps(pfx) {
				p.slots.free(pfx)
				freed = append(freed, pfx)
			}
		}
		p.mu.Unlock()
		for _, pfx := range freed {
			_, sandboxAddr := ends(pfx)
			if err := forgetFlows(sandboxAddr); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// hostEnd finds this server's host end by name.
func (p *Plumbing) hostEnd(name string) (netlink.Link, error) {
	if !strings.HasPrefix(name, p.cfg.ifPrefix()) || len(name) > maxIfName {
		return nil, fmt.Errorf("%q is not an interface of this server", name)
	}
	link, err := netlink.LinkByName(name)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", name, ErrNoLink)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", name, err)
	}
	return link, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, errNoDevice)
}

// nft runs an nft script as one transaction.
func nft(script string) error {
	path, err := exec.LookPath("nft")
	if err != nil {
		// root's PATH has /usr/sbin; a service's may not.
		path = "/usr/sbin/nft"
	}
	cmd := exec.Command(path, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// Remove deletes what a server named name left on the host, veths and
// table, without installing anything: for a server whose data dir is
// gone, so that no server of it will ever come back.
func Remove(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	cfg := Config{Name: name}
	cfg.Pool = cfg.pool()
	p := &Plumbing{cfg: cfg, slots: newSlots(cfg.Pool)}
	return p.Uninstall()
}

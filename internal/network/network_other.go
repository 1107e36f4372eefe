//go:build !linux

package network

import (
	"errors"
	"net"
	"net/netip"
)

var errNotLinux = errors.New("network: sandbox networking needs Linux")

// Plumbing is one server's share of the host's network (Linux only).
type Plumbing struct{}

// NewNamespace needs Linux.
func NewNamespace(path string) error { return errNotLinux }

// RemoveNamespace needs Linux.
func RemoveNamespace(path string) error { return errNotLinux }

// New returns a plumbing that cannot be installed.
func New(cfg Config) *Plumbing { return &Plumbing{} }

// Install needs Linux.
func (p *Plumbing) Install() error { return errNotLinux }

// Join needs Linux.
func Join(net any) (*Plumbing, error) { return nil, errNotLinux }

// Attach needs Linux.
func (p *Plumbing) Attach(id, nsPath string) (Link, error) { return Link{}, errNotLinux }

// Adopt needs Linux.
func (p *Plumbing) Adopt(l Link) error { return errNotLinux }

// Detach needs Linux.
func (p *Plumbing) Detach(l Link) error { return errNotLinux }

// SetOnline needs Linux.
func (p *Plumbing) SetOnline(l Link, online bool) error { return errNotLinux }

// Sweep needs Linux.
func (p *Plumbing) Sweep(keep func(hostIf string) bool) error { return errNotLinux }

// Uninstall needs Linux.
func (p *Plumbing) Uninstall() error { return errNotLinux }

// OriginalDst needs Linux.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, errNotLinux }

func InNamespace(path string, f func() error) error { return errNotLinux }

// Remove needs Linux.
func Remove(name string) error { return errNotLinux }

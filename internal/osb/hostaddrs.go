package osb

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// thisMachine holds the addresses of this machine's interfaces, which the
// egress policy treats as loopback: a broker URL naming the machine's LAN
// address reaches the same local services as 127.0.0.1.
var thisMachine = &hostAddrs{fd: -1}

// hostAddrs keeps the addresses of the machine's interfaces, read again
// whenever the kernel announces that an address or a link changed. It
// subscribes to those announcements on a netlink socket that it reads
// without blocking at each look, so a look costs one system call until
// something changed, and it needs no goroutine of its own. Where no such
// socket can be had, every look reads the addresses afresh.
type hostAddrs struct {
	mu     sync.Mutex
	opened bool
	fd     int // the netlink socket; -1 when there is none
	addrs  map[netip.Addr]bool
	read   bool // addrs holds a reading no announcement has made stale
	buf    []byte
}

// has tells whether addr is an address of one of the machine's
// interfaces.
func (h *hostAddrs) has(addr netip.Addr) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.opened {
		h.opened = true
		h.fd = subscribe()
		h.buf = make([]byte, 64<<10)
	}
	if h.changed() || !h.read {
		if err := h.reread(); err != nil {
			return false, err
		}
	}
	return h.addrs[addr.WithZone("")], nil
}

// subscribe opens a netlink socket that receives the kernel's address and
// link announcements, or returns -1.
func subscribe() int {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return -1
	}
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		_ = unix.Close(fd)
		return -1
	}
	return fd
}

// changed drains the announcements waiting on the socket and tells
// whether there were any (or whether some were lost).
func (h *hostAddrs) changed() bool {
	if h.fd < 0 {
		return true
	}
	changed := false
	for {
		n, _, err := unix.Recvfrom(h.fd, h.buf, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EWOULDBLOCK):
			return changed
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			// ENOBUFS: announcements were dropped. Anything else: the
			// socket is no use any more; read afresh from now on.
			if !errors.Is(err, unix.ENOBUFS) {
				_ = unix.Close(h.fd)
				h.fd = -1
			}
			return true
		case n > 0:
			changed = true
		}
	}
}

// reread reads the interfaces' addresses.
func (h *hostAddrs) reread() error {
	h.read = false
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	addrs := make(map[netip.Addr]bool, len(ifaddrs))
	for _, a := range ifaddrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		addrs[p.Addr().Unmap().WithZone("")] = true
	}
	h.addrs, h.read = addrs, true
	return nil
}

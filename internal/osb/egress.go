package osb

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Egress says which addresses Bindery may open connections to when it calls
// a broker. It is checked on every connection, after DNS resolution, so a
// name that resolves (or re-resolves) to a forbidden address is refused as
// well as a literal one. The zero value allows every address except the
// defaults of DefaultDeny and loopback.
type Egress struct {
	// Allow, when not empty, is the only ranges brokers may be in.
	Allow []netip.Prefix
	// Deny ranges are refused even when Allow holds them; DefaultDeny is
	// always added.
	Deny []netip.Prefix
	// AllowLoopback lets brokers be on this machine: loopback (127.0.0.0/8,
	// ::1) and every address of the machine's own interfaces, which reach
	// the same local services. `bindery up` and tests run their brokers
	// there. Off by default, so a broker URL cannot reach Bindery's own
	// ports or other local services.
	AllowLoopback bool
}

// DefaultDeny are ranges no broker is in and that an attacker who can
// register brokers would like to reach: link-local (cloud metadata services
// live at 169.254.169.254, fd00:ec2::254 and 100.100.100.200), and the
// unspecified addresses, which connect to this machine.
var DefaultDeny = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
}

// Check says why a connection to addr is refused, or nil.
func (e *Egress) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	local := addr.IsLoopback()
	if !local {
		own, err := thisMachine.has(addr)
		if err != nil {
			return fmt.Errorf("broker egress policy: cannot tell whether %s is an address of this machine: %w", addr, err)
		}
		local = own
	}
	switch {
	case local && e.AllowLoopback:
		return e.checkDenied(addr)
	case addr.IsLoopback():
		return fmt.Errorf("broker egress policy: %s is a loopback address (allowed only with --broker-allow-loopback)", addr)
	case local:
		return fmt.Errorf("broker egress policy: %s is an address of this machine (allowed only with --broker-allow-loopback)", addr)
	}
	if err := e.checkDenied(addr); err != nil {
		return err
	}
	if len(e.Allow) == 0 {
		return nil
	}
	for _, p := range e.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	return fmt.Errorf("broker egress policy: %s is outside the allowed ranges (--broker-egress-allow)", addr)
}

// checkDenied refuses the denied ranges, the defaults and the flag's.
func (e *Egress) checkDenied(addr netip.Addr) error {
	for _, lists := range [][]netip.Prefix{DefaultDeny, e.Deny} {
		for _, p := range lists {
			if p.Contains(addr) {
				return fmt.Errorf("broker egress policy: %s is in the denied range %s", addr, p)
			}
		}
	}
	return nil
}

// control is a net.Dialer Control function: it runs for each connection
// attempt with the resolved address, before the connection is made.
func (e *Egress) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("broker egress policy: %q is not an address", host)
	}
	return e.Check(ip)
}

// ParsePrefixes reads CIDRs (a single address means just it) for the
// egress flags, naming the flag in errors.
func ParsePrefixes(flag string, values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		if v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("%s: %q is not a CIDR range or an address", flag, v)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Grant is an endpoint with its host resolved to one address: what the rules
// let a Pod reach.
type Grant struct {
	Host     string      `json:"host"`
	Addr     netip.Addr  `json:"addr"`
	Protocol string      `json:"protocol"`
	Ports    []PortRange `json:"ports,omitempty"`
}

// lookupFunc resolves a host name, as net.Resolver.LookupNetIP does.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// resolveGrants turns endpoints into grants, one per address of each host.
// Hosts given as addresses are not looked up. A name that does not exist is
// left out and returned in missing (the Pod is granted less, never more); any
// other lookup error is returned, as it may pass.
func resolveGrants(ctx context.Context, eps []Endpoint, lookup lookupFunc) (grants []Grant, missing []string, err error) {
	for _, ep := range eps {
		ports, err := parsePorts(ep.Ports)
		if err != nil {
			return nil, nil, fmt.Errorf("endpoint %s: %w", ep.Host, err)
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(ep.Host); err == nil {
			addrs = []netip.Addr{a}
		} else {
			addrs, err = lookup(ctx, ep.Host)
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				missing = append(missing, ep.Host)
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("resolve endpoint host %s: %w", ep.Host, err)
			}
		}
		for _, a := range addrs {
			grants = append(grants, Grant{Host: ep.Host, Addr: a.Unmap(), Protocol: ep.Protocol, Ports: ports})
		}
	}
	return grants, missing, nil
}

// systemLookup resolves through the host's resolver.
func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

package cni

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

func TestResolveGrants(t *testing.T) {
	t.Parallel()
	hosts := map[string][]netip.Addr{
		"db.example": {netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("::ffff:198.18.0.3")},
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := hosts[host]; ok {
			return a, nil
		}
		if host == "flaky.example" {
			return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	eps := []Endpoint{
		{Host: "db.example", Ports: []string{"5432"}, Protocol: "tcp"},
		{Host: "198.18.0.9", Ports: []string{"1-2"}, Protocol: "udp"},
		{Host: "gone.example", Ports: []string{"1"}, Protocol: "tcp"},
	}
	grants, missing, err := resolveGrants(context.Background(), eps, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []Grant{
		{Host: "db.example", Addr: netip.MustParseAddr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}}},
		{Host: "db.example", Addr: netip.MustParseAddr("198.18.0.3"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}}},
		{Host: "198.18.0.9", Addr: netip.MustParseAddr("198.18.0.9"), Protocol: "udp", Ports: []PortRange{{1, 2}}},
	}
	if !reflect.DeepEqual(grants, want) {
		t.Errorf("grants:\n got  %v\n want %v", grants, want)
	}
	if !reflect.DeepEqual(missing, []string{"gone.example"}) {
		t.Errorf("missing %v, want [gone.example]", missing)
	}

	_, _, err = resolveGrants(context.Background(), []Endpoint{{Host: "flaky.example", Protocol: "tcp"}}, lookup)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsTemporary {
		t.Errorf("a failing lookup: %v, want the DNS error", err)
	}
}

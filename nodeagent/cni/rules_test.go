package cni

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/nftables/expr"
)

func TestBuildRuleset(t *testing.T) {
	t.Parallel()
	managed := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("fd00:b::/64")}
	addr := netip.MustParseAddr
	// The rules are the same for every Pod: only the sets differ.
	rules := []string{
		"ct state established,related accept",
		"ip daddr @hosts4 accept",
		"ip daddr . meta l4proto . th dport @grants4 accept",
		"ip6 daddr @hosts6 accept",
		"ip6 daddr . meta l4proto . th dport @grants6 accept",
		"ip daddr 198.18.0.0/24 counter drop",
		"ip6 daddr fd00:b::/64 counter drop",
	}
	tests := []struct {
		name     string
		grants   []Grant
		elements []string
	}{
		{name: "no grants drops the managed ranges"},
		{
			name:     "tcp port and range",
			grants:   []Grant{{Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}, {6000, 6010}}}},
			elements: []string{"grants4: 198.18.0.2 . tcp . 5432", "grants4: 198.18.0.2 . tcp . 6000-6010"},
		},
		{
			name:     "udp without ports is the whole protocol",
			grants:   []Grant{{Addr: addr("fd00:b::5"), Protocol: "udp"}},
			elements: []string{"grants6: fd00:b::5 . udp . 0-65535"},
		},
		{
			name:     "all with ports is tcp and udp",
			grants:   []Grant{{Addr: addr("198.18.0.3"), Protocol: "all", Ports: []PortRange{{53, 53}}}},
			elements: []string{"grants4: 198.18.0.3 . tcp . 53", "grants4: 198.18.0.3 . udp . 53"},
		},
		{
			name:     "all without ports is the address",
			grants:   []Grant{{Addr: addr("198.18.0.4"), Protocol: "all"}},
			elements: []string{"hosts4: 198.18.0.4"},
		},
		{
			name: "grants outside the managed ranges and repeats make no element",
			grants: []Grant{
				{Addr: addr("10.0.0.1"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
				{Host: "a", Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
				{Host: "b", Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
			},
			elements: []string{"grants4: 198.18.0.2 . tcp . 80"},
		},
		{
			name: "overlapping and touching ranges are merged, as an interval set refuses overlaps",
			grants: []Grant{
				{Addr: addr("198.18.0.9"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}, {7000, 7000}}},
				{Addr: addr("198.18.0.9"), Protocol: "tcp", Ports: []PortRange{{5000, 6000}, {6001, 6005}}},
				{Addr: addr("198.18.0.2"), Protocol: "udp", Ports: []PortRange{{1, 1}}},
			},
			elements: []string{
				"grants4: 198.18.0.2 . udp . 1",
				"grants4: 198.18.0.9 . tcp . 5000-6005",
				"grants4: 198.18.0.9 . tcp . 7000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := BuildRuleset(managed, tt.grants).specs()
			want := append(slices.Clone(rules), tt.elements...)
			if !slices.Equal(got, want) {
				t.Errorf("ruleset:\n got  %q\n want %q", got, want)
			}
		})
	}
}

// TestBuildRulesetOneFamily: a family with no managed range gets no set
// and no lookup.
func TestBuildRulesetOneFamily(t *testing.T) {
	t.Parallel()
	rs := BuildRuleset([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}, nil)
	want := []string{
		"ct state established,related accept",
		"ip daddr @hosts4 accept",
		"ip daddr . meta l4proto . th dport @grants4 accept",
		"ip daddr 198.18.0.0/24 counter drop",
	}
	if got := rs.specs(); !slices.Equal(got, want) {
		t.Errorf("ruleset:\n got  %q\n want %q", got, want)
	}
	if len(rs.Sets) != 2 || rs.Sets[0].Name != "hosts4" || rs.Sets[1].Name != "grants4" {
		t.Errorf("sets %+v", rs.Sets)
	}
}

// TestRuleExprs pins the expressions of the lookups, one drop rule and the
// elements' keys: the specs above only name them.
func TestRuleExprs(t *testing.T) {
	t.Parallel()
	lookup4 := lookupRule(Set{Name: "grants4", Ports: true})
	want := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{2}}, // NFPROTO_IPV4
		// Address, protocol and port each in a 32-bit register from
		// NFT_REG32_00, the start of NFT_REG_1: 1, 9 and 10.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 9},
		&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "grants4"},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	if !reflect.DeepEqual(lookup4.Exprs, want) {
		t.Errorf("grants4 lookup exprs:\n got  %#v\n want %#v", lookup4.Exprs, want)
	}
	lookup6 := lookupRule(Set{Name: "grants6", IPv6: true, Ports: true})
	want6 := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10}}, // NFPROTO_IPV6
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 2}, // NFT_REG32_04 is where NFT_REG_2 starts
		&expr.Payload{DestRegister: 13, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "grants6"},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	if !reflect.DeepEqual(lookup6.Exprs, want6) {
		t.Errorf("grants6 lookup exprs:\n got  %#v\n want %#v", lookup6.Exprs, want6)
	}
	hosts := lookupRule(Set{Name: "hosts4"})
	wantHosts := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{2}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: "hosts4"},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	if !reflect.DeepEqual(hosts.Exprs, wantHosts) {
		t.Errorf("hosts4 lookup exprs:\n got  %#v\n want %#v", hosts.Exprs, wantHosts)
	}
	d := dropRule(netip.MustParsePrefix("198.18.4.0/22"))
	wantDrop := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{2}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 252, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{198, 18, 4, 0}},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
	if !reflect.DeepEqual(d.Exprs, wantDrop) {
		t.Errorf("drop exprs:\n got  %#v\n want %#v", d.Exprs, wantDrop)
	}
	rs := BuildRuleset([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")},
		[]Grant{{Addr: netip.MustParseAddr("198.18.0.2"), Protocol: "udp", Ports: []PortRange{{6000, 6010}}}})
	e := rs.Sets[1].Elements[0]
	// 198.18.0.2, then UDP (17) and the port (big-endian), each padded to four bytes.
	if k := []byte{198, 18, 0, 2, 17, 0, 0, 0, 0x17, 0x70, 0, 0}; !slices.Equal(e.Key, k) {
		t.Errorf("element key % x, want % x", e.Key, k)
	}
	if k := []byte{198, 18, 0, 2, 17, 0, 0, 0, 0x17, 0x7a, 0, 0}; !slices.Equal(e.KeyEnd, k) {
		t.Errorf("element key end % x, want % x", e.KeyEnd, k)
	}
}

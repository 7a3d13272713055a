package cni

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

func TestBuildRules(t *testing.T) {
	t.Parallel()
	managed := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("fd00:b::/64")}
	addr := netip.MustParseAddr
	tests := []struct {
		name   string
		grants []Grant
		want   []string
	}{
		{
			name: "no grants drops the managed ranges",
			want: []string{
				"ct state established,related accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
		{
			name:   "tcp port and range",
			grants: []Grant{{Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}, {6000, 6010}}}},
			want: []string{
				"ct state established,related accept",
				"ip daddr 198.18.0.2 meta l4proto tcp th dport 5432 accept",
				"ip daddr 198.18.0.2 meta l4proto tcp th dport 6000-6010 accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
		{
			name:   "udp without ports is the whole protocol",
			grants: []Grant{{Addr: addr("fd00:b::5"), Protocol: "udp"}},
			want: []string{
				"ct state established,related accept",
				"ip6 daddr fd00:b::5 meta l4proto udp accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
		{
			name:   "all with ports is tcp and udp",
			grants: []Grant{{Addr: addr("198.18.0.3"), Protocol: "all", Ports: []PortRange{{53, 53}}}},
			want: []string{
				"ct state established,related accept",
				"ip daddr 198.18.0.3 meta l4proto tcp th dport 53 accept",
				"ip daddr 198.18.0.3 meta l4proto udp th dport 53 accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
		{
			name:   "all without ports is the address",
			grants: []Grant{{Addr: addr("198.18.0.4"), Protocol: "all"}},
			want: []string{
				"ct state established,related accept",
				"ip daddr 198.18.0.4 accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
		{
			name: "grants outside the managed ranges and repeats make no rule",
			grants: []Grant{
				{Addr: addr("10.0.0.1"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
				{Host: "a", Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
				{Host: "b", Addr: addr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{80, 80}}},
			},
			want: []string{
				"ct state established,related accept",
				"ip daddr 198.18.0.2 meta l4proto tcp th dport 80 accept",
				"ip daddr 198.18.0.0/24 counter drop",
				"ip6 daddr fd00:b::/64 counter drop",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := specs(BuildRules(managed, tt.grants))
			if !slices.Equal(got, tt.want) {
				t.Errorf("rules:\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

// TestRuleExprs pins the expressions of one accept and one drop rule: the
// specs above only name them.
func TestRuleExprs(t *testing.T) {
	t.Parallel()
	r := acceptRule(netip.MustParseAddr("198.18.0.2"), "tcp", &PortRange{6000, 6010})
	want := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{2}}, // NFPROTO_IPV4
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{198, 18, 0, 2}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}}, // IPPROTO_TCP
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint16(6000), ToData: binaryutil.BigEndian.PutUint16(6010)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	if !reflect.DeepEqual(r.Exprs, want) {
		t.Errorf("accept exprs:\n got  %#v\n want %#v", r.Exprs, want)
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
}

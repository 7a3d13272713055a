package cni

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The plugin's own table and chain in a Pod's network namespace.
const (
	tableName = "bindery"
	chainName = "egress"
)

// Rule is one nftables rule: Spec says in nft's syntax what Exprs do, and is
// stored with the rule as its comment, which is how CHECK recognises it.
type Rule struct {
	Spec  string
	Exprs []expr.Any
}

// BuildRules returns the rules, in order, that let a Pod reach only its
// grants inside managed: established and related traffic first, then one
// accept per granted address, protocol and port range, then one drop per
// managed range. Grants outside managed need no rule and get none; repeated
// grants get one rule.
func BuildRules(managed []netip.Prefix, grants []Grant) []Rule {
	rules := []Rule{establishedRule()}
	seen := map[string]bool{}
	add := func(r Rule) {
		if !seen[r.Spec] {
			seen[r.Spec] = true
			rules = append(rules, r)
		}
	}
	for _, g := range grants {
		if !inAny(managed, g.Addr) {
			continue
		}
		protos := []string{g.Protocol}
		if g.Protocol == ProtocolAll && len(g.Ports) > 0 {
			// Ports only mean something to a transport protocol.
			protos = []string{ProtocolTCP, ProtocolUDP}
		}
		for _, proto := range protos {
			if len(g.Ports) == 0 {
				add(acceptRule(g.Addr, proto, nil))
				continue
			}
			for _, pr := range g.Ports {
				add(acceptRule(g.Addr, proto, &pr))
			}
		}
	}
	for _, p := range managed {
		add(dropRule(p.Masked()))
	}
	return rules
}

func inAny(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func establishedRule() Rule {
	mask := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	return Rule{
		Spec: "ct state established,related accept",
		Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		},
	}
}

// acceptRule accepts new traffic to addr over proto (tcp, udp, or all: any
// protocol) and, when ports is not nil, to those destination ports.
func acceptRule(addr netip.Addr, proto string, ports *PortRange) Rule {
	spec := family(addr) + " daddr " + addr.String()
	exprs := daddrExprs(addr)
	if proto != ProtocolAll {
		num := byte(unix.IPPROTO_TCP)
		if proto == ProtocolUDP {
			num = unix.IPPROTO_UDP
		}
		spec += " meta l4proto " + proto
		exprs = append(exprs,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{num}},
		)
		if ports != nil {
			spec += " th dport " + ports.String()
			// Both TCP and UDP carry the destination port at offset 2.
			exprs = append(exprs, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
			if ports.First == ports.Last {
				exprs = append(exprs, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(ports.First)})
			} else {
				exprs = append(exprs, &expr.Range{Op: expr.CmpOpEq, Register: 1,
					FromData: binaryutil.BigEndian.PutUint16(ports.First),
					ToData:   binaryutil.BigEndian.PutUint16(ports.Last)})
			}
		}
	}
	return Rule{Spec: spec + " accept", Exprs: append(exprs, &expr.Verdict{Kind: expr.VerdictAccept})}
}

// dropRule drops what is left of the traffic into p.
func dropRule(p netip.Prefix) Rule {
	exprs := familyExprs(p.Addr())
	off, n := daddrField(p.Addr())
	exprs = append(exprs, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
	if p.Bits() < p.Addr().BitLen() {
		mask := netipMask(p)
		exprs = append(exprs, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	exprs = append(exprs,
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	)
	return Rule{Spec: fmt.Sprintf("%s daddr %s counter drop", family(p.Addr()), p), Exprs: exprs}
}

func daddrExprs(a netip.Addr) []expr.Any {
	off, n := daddrField(a)
	return append(familyExprs(a),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()},
	)
}

// familyExprs match packets of a's family: the inet table sees both.
func familyExprs(a netip.Addr) []expr.Any {
	proto := byte(unix.NFPROTO_IPV4)
	if !a.Is4() {
		proto = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// daddrField is the offset and length of the destination address in the
// network header of a's family.
func daddrField(a netip.Addr) (offset, length uint32) {
	if a.Is4() {
		return 16, 4
	}
	return 24, 16
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "ip"
	}
	return "ip6"
}

func netipMask(p netip.Prefix) []byte {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return mask
}

// table and chain are the plugin's nftables objects.
func table() *nftables.Table {
	return &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
}

func chain(t *nftables.Table) *nftables.Chain {
	policy := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name:     chainName,
		Table:    t,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityFilter,
		Policy:   &policy,
	}
}

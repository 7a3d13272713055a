package cni

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

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

// Ruleset is what the plugin writes into a Pod's network namespace: the
// rules of its chain, in order, and the sets in which they look up the
// Pod's grants. The rules are the same for every Pod with the same
// managed ranges; only the sets' elements differ, so that a Pod with many
// grants costs set elements, which the kernel takes in one message, rather
// than rules.
type Ruleset struct {
	Rules []Rule
	Sets  []Set
}

// Rule is one nftables rule: Spec says in nft's syntax what Exprs do, and is
// stored with the rule as its comment, which is how CHECK recognises it.
type Rule struct {
	Spec  string
	Exprs []expr.Any
}

// Set is one of the table's named sets. A ports set holds address .
// protocol . port-range elements (a concatenation with intervals); the
// other kind holds whole addresses, for grants of every protocol.
type Set struct {
	Name     string
	IPv6     bool
	Ports    bool
	Elements []Element
}

// Element is one set element: Spec in nft's syntax, Key and KeyEnd as the
// kernel stores them (KeyEnd only in a ports set, where every element is
// an interval).
type Element struct {
	Spec        string
	Key, KeyEnd []byte
}

// reg32 names the i-th 32-bit register, where a concatenation's fields
// go one after another. Every fourth is the start of a 128-bit register,
// and the kernel reports it by that name (NFT_REG_1 for NFT_REG32_00), so
// the rules name it so too, as nft does.
func reg32(i uint32) uint32 {
	if i%4 == 0 {
		return unix.NFT_REG_1 + i/4
	}
	return unix.NFT_REG32_00 + i
}

// BuildRuleset returns what lets a Pod reach only its grants inside managed:
// established and related traffic first; then, for each address family
// that managed has, a lookup of the destination address (grants of every
// protocol) and one of address . protocol . port; then one drop per managed
// range. Grants outside managed make no element; repeated and overlapping
// grants are merged, as an interval set refuses overlaps.
func BuildRuleset(managed []netip.Prefix, grants []Grant) Ruleset {
	rs := Ruleset{Rules: []Rule{establishedRule()}}
	for _, v6 := range []bool{false, true} {
		if !slices.ContainsFunc(managed, func(p netip.Prefix) bool { return p.Addr().Is6() == v6 }) {
			continue
		}
		hosts, ports := elements(managed, grants, v6)
		hs := Set{Name: setName("hosts", v6), IPv6: v6, Elements: hosts}
		ps := Set{Name: setName("grants", v6), IPv6: v6, Ports: true, Elements: ports}
		rs.Sets = append(rs.Sets, hs, ps)
		rs.Rules = append(rs.Rules, lookupRule(hs), lookupRule(ps))
	}
	for _, p := range managed {
		rs.Rules = append(rs.Rules, dropRule(p.Masked()))
	}
	return rs
}

func setName(kind string, v6 bool) string {
	if v6 {
		return kind + "6"
	}
	return kind + "4"
}

// elements returns the elements of the hosts and the ports set of one
// family: one per granted address of every protocol, and one per address,
// protocol and merged port range otherwise (a protocol without ports is
// the range 0-65535).
func elements(managed []netip.Prefix, grants []Grant, v6 bool) (hosts, ports []Element) {
	type key struct {
		addr  netip.Addr
		proto string
	}
	ranges := map[key][]PortRange{}
	whole := map[netip.Addr]bool{}
	for _, g := range grants {
		if g.Addr.Is6() != v6 || !inAny(managed, g.Addr) {
			continue
		}
		if g.Protocol == ProtocolAll && len(g.Ports) == 0 {
			whole[g.Addr] = true
			continue
		}
		protos := []string{g.Protocol}
		if g.Protocol == ProtocolAll {
			// Ports only mean something to a transport protocol.
			protos = []string{ProtocolTCP, ProtocolUDP}
		}
		prs := g.Ports
		if len(prs) == 0 {
			prs = []PortRange{{0, 65535}}
		}
		for _, proto := range protos {
			k := key{g.Addr, proto}
			ranges[k] = append(ranges[k], prs...)
		}
	}
	for _, a := range slices.SortedFunc(mapKeys(whole), netip.Addr.Compare) {
		hosts = append(hosts, Element{Spec: a.String(), Key: a.AsSlice()})
	}
	keys := slices.SortedFunc(mapKeys(ranges), func(a, b key) int {
		return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.proto, b.proto))
	})
	for _, k := range keys {
		for _, pr := range mergeRanges(ranges[k]) {
			ports = append(ports, Element{
				Spec:   k.addr.String() + " . " + k.proto + " . " + pr.String(),
				Key:    concatKey(k.addr, k.proto, pr.First),
				KeyEnd: concatKey(k.addr, k.proto, pr.Last),
			})
		}
	}
	return hosts, ports
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// mergeRanges sorts port ranges and merges those that overlap or touch.
func mergeRanges(prs []PortRange) []PortRange {
	prs = slices.Clone(prs)
	slices.SortFunc(prs, func(a, b PortRange) int { return cmp.Compare(a.First, b.First) })
	out := prs[:0]
	for _, pr := range prs {
		if n := len(out); n > 0 && uint32(pr.First) <= uint32(out[n-1].Last)+1 {
			out[n-1].Last = max(out[n-1].Last, pr.Last)
			continue
		}
		out = append(out, pr)
	}
	return out
}

// concatKey is address . protocol . port as a concatenation stores it:
// each field padded to a multiple of four bytes, the port big-endian.
func concatKey(a netip.Addr, proto string, port uint16) []byte {
	k := append([]byte(nil), a.AsSlice()...)
	k = append(k, protoNumber(proto), 0, 0, 0)
	return append(k, byte(port>>8), byte(port), 0, 0)
}

func protoNumber(proto string) byte {
	if proto == ProtocolUDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
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

// lookupRule accepts new traffic whose destination is in s: the address
// alone, or address . protocol . destination port for a ports set.
func lookupRule(s Set) Rule {
	var a netip.Addr
	if s.IPv6 {
		a = netip.IPv6Unspecified()
	} else {
		a = netip.IPv4Unspecified()
	}
	off, n := daddrField(a)
	exprs := append(familyExprs(a), &expr.Payload{DestRegister: reg32(0), Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n})
	spec := family(a) + " daddr"
	if s.Ports {
		exprs = append(exprs,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg32(n / 4)},
			// Both TCP and UDP carry the destination port at offset 2.
			&expr.Payload{DestRegister: reg32(n/4 + 1), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		)
		spec += " . meta l4proto . th dport"
	}
	exprs = append(exprs,
		&expr.Lookup{SourceRegister: reg32(0), SetName: s.Name},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
	return Rule{Spec: spec + " @" + s.Name + " accept", Exprs: exprs}
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

// table, chain and nftSet are the plugin's nftables objects.
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

func nftSet(t *nftables.Table, s Set) *nftables.Set {
	addr := nftables.TypeIPAddr
	if s.IPv6 {
		addr = nftables.TypeIP6Addr
	}
	if !s.Ports {
		return &nftables.Set{Table: t, Name: s.Name, KeyType: addr}
	}
	return &nftables.Set{
		Table: t, Name: s.Name, Interval: true, Concatenation: true,
		KeyType: nftables.MustConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService),
	}
}

// specs lists what a ruleset holds in nft's words: the rules in order,
// then each set's elements as "name: element". The attachment records it,
// and CHECK compares it with what the configuration makes now.
func (rs Ruleset) specs() []string {
	out := make([]string, 0, len(rs.Rules))
	for _, r := range rs.Rules {
		out = append(out, r.Spec)
	}
	for _, s := range rs.Sets {
		for _, e := range s.Elements {
			out = append(out, s.Name+": "+e.Spec)
		}
	}
	return out
}

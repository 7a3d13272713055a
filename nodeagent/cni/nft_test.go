package cni

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// TestApplyRuleset writes rulesets into a real namespace: again over its
// own table (rules and elements are replaced, not added to), and over a
// chain someone re-made with another priority (the table is made again);
// rules and elements changed behind the plugin's back are told apart.
func TestApplyRuleset(t *testing.T) {
	roottest.Require(t, "TestApplyRuleset (a network namespace)")
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	nft := func(args ...string) string {
		t.Helper()
		var out []byte
		if err := ns.WithNetNSPath(n.Path(), func(ns.NetNS) error {
			var err error
			out, err = exec.Command("nft", args...).CombinedOutput()
			return err
		}); err != nil {
			t.Fatalf("nft %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	managed := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("fd00:b::/64")}
	one := BuildRuleset(managed, []Grant{
		{Addr: netip.MustParseAddr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}, {6000, 6010}}},
		{Addr: netip.MustParseAddr("198.18.0.3"), Protocol: "all"},
		{Addr: netip.MustParseAddr("fd00:b::2"), Protocol: "udp"},
	})
	two := BuildRuleset(managed, nil)

	if _, err := readRuleset(n.Path()); err != errNoTable {
		t.Fatalf("readRuleset before ADD: %v, want errNoTable", err)
	}
	for _, want := range []Ruleset{one, two, one} {
		if err := applyRuleset(n.Path(), want); err != nil {
			t.Fatal(err)
		}
		got, err := readRuleset(n.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRuleset(got, want); err != nil {
			t.Errorf("ruleset read back: %v", err)
		}
	}
	// nft itself reads the table as the specs say.
	listed := nft("list", "table", "inet", "bindery")
	for _, s := range []string{"198.18.0.2 . tcp . 6000-6010", "198.18.0.3", "fd00:b::2 . udp . 0-65535", "ip daddr . meta l4proto . th dport @grants4 accept"} {
		if !strings.Contains(listed, s) {
			t.Errorf("nft list table lacks %q:\n%s", s, listed)
		}
	}

	nft("delete", "table", "inet", "bindery")
	nft("add", "table", "inet", "bindery")
	nft("add", "chain", "inet", "bindery", "egress", "{ type filter hook output priority 10; }")
	if _, err := readRuleset(n.Path()); err == nil {
		t.Errorf("readRuleset accepted a chain at priority 10")
	}
	if err := applyRuleset(n.Path(), one); err != nil {
		t.Fatalf("apply over a re-made chain: %v", err)
	}
	if got, err := readRuleset(n.Path()); err != nil || sameRuleset(got, one) != nil {
		t.Errorf("after apply over a re-made chain: %v, %v", got.specs(), err)
	}

	// A rule replaced behind its comment: same comment, other set.
	forged := one
	forged.Rules = append([]Rule(nil), one.Rules...)
	forged.Rules[2] = lookupRule(Set{Name: "hosts4"})
	forged.Rules[2].Spec = one.Rules[2].Spec
	if err := applyRuleset(n.Path(), forged); err != nil {
		t.Fatal(err)
	}
	if got, err := readRuleset(n.Path()); err != nil || sameRuleset(got, one) == nil {
		t.Errorf("sameRuleset accepted a rule whose expressions differ from its comment (%v)", err)
	}
	// An element added behind the plugin's back.
	if err := applyRuleset(n.Path(), one); err != nil {
		t.Fatal(err)
	}
	nft("add", "element", "inet", "bindery", "grants4", "{ 198.18.0.2 . tcp . 1-65535 }")
	if got, err := readRuleset(n.Path()); err != nil || sameRuleset(got, one) == nil {
		t.Errorf("sameRuleset accepted a set with an element added (%v)", err)
	}
	if err := applyRuleset(n.Path(), one); err != nil {
		t.Fatalf("apply over an added element: %v", err)
	}
	if got, err := readRuleset(n.Path()); err != nil || sameRuleset(got, one) != nil {
		t.Errorf("after apply over an added element: %v", err)
	}

	if err := deleteTable(n.Path()); err != nil {
		t.Fatal(err)
	}
	if err := deleteTable(n.Path()); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if _, err := readRuleset(n.Path()); err != errNoTable {
		t.Errorf("readRuleset after delete: %v", err)
	}
}

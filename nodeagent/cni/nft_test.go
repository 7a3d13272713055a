package cni

import (
	"net/netip"
	"os/exec"
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// TestApplyRules writes rules into a real namespace: again over its own
// table (the rules are replaced, not added to), and over a chain someone
// re-made with another priority (the table is made again).
func TestApplyRules(t *testing.T) {
	roottest.Require(t, "TestApplyRules (a network namespace)")
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	managed := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
	one := BuildRules(managed, []Grant{{Addr: netip.MustParseAddr("198.18.0.2"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}}}})
	two := BuildRules(managed, nil)

	if _, err := readRules(n.Path()); err != errNoTable {
		t.Fatalf("readRules before ADD: %v, want errNoTable", err)
	}
	for _, want := range [][]Rule{one, two} {
		if err := applyRules(n.Path(), want); err != nil {
			t.Fatal(err)
		}
		got, err := readRules(n.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRules(got, want); err != nil {
			t.Errorf("rules read back: %v", err)
		}
	}

	if err := ns.WithNetNSPath(n.Path(), func(ns.NetNS) error {
		for _, args := range [][]string{
			{"delete", "table", "inet", "bindery"},
			{"add", "table", "inet", "bindery"},
			{"add", "chain", "inet", "bindery", "egress", "{ type filter hook output priority 10; }"},
		} {
			if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
				t.Fatalf("nft %v: %v: %s", args, err, out)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := readRules(n.Path()); err == nil {
		t.Errorf("readRules accepted a chain at priority 10")
	}
	if err := applyRules(n.Path(), one); err != nil {
		t.Fatalf("apply over a re-made chain: %v", err)
	}
	if got, err := readRules(n.Path()); err != nil || sameRules(got, one) != nil {
		t.Errorf("after apply over a re-made chain: %v, %v", specs(got), err)
	}

	// A rule replaced behind its comment: same comment, other port.
	if err := applyRules(n.Path(), one); err != nil {
		t.Fatal(err)
	}
	forged := slices.Clone(one)
	forged[1] = acceptRule(netip.MustParseAddr("198.18.0.2"), "tcp", &PortRange{1, 65535})
	forged[1].Spec = one[1].Spec
	if err := applyRules(n.Path(), forged); err != nil {
		t.Fatal(err)
	}
	got, err := readRules(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRules(got, one); err == nil {
		t.Errorf("sameRules accepted a rule whose expressions differ from its comment")
	}
	if err := deleteTable(n.Path()); err != nil {
		t.Fatal(err)
	}
	if err := deleteTable(n.Path()); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if _, err := readRules(n.Path()); err != errNoTable {
		t.Errorf("readRules after delete: %v", err)
	}
}

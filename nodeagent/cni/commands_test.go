package cni

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// memRules keeps rulesets by namespace path in memory, as NFTables keeps
// them in each namespace's nftables: the commands' logic, tested without
// root. The kernel half is tested by nft_test.go and the chain tests.
type memRules struct {
	mu       sync.Mutex
	tables   map[string]Ruleset
	applyErr error // Apply fails with it when set
	readyErr error
}

func newMemRules() *memRules { return &memRules{tables: map[string]Ruleset{}} }

func (m *memRules) Apply(netns string, rs Ruleset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applyErr != nil {
		return m.applyErr
	}
	m.tables[netns] = rs
	return nil
}

func (m *memRules) Delete(netns string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tables, netns)
	return nil
}

func (m *memRules) Read(netns string) (Ruleset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs, ok := m.tables[netns]
	if !ok {
		return Ruleset{}, errNoTable
	}
	return rs, nil
}

func (m *memRules) Ready() error { return m.readyErr }

func (m *memRules) has(netns string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.tables[netns]
	return ok
}

// cmdSetup is what a command test needs: the plugin over memRules, its
// state directory, and a file standing in for a network namespace's path.
type cmdSetup struct {
	p     *Plugin
	rules *memRules
	state string
	dir   string
}

func setupCommands(t *testing.T) *cmdSetup {
	t.Helper()
	rules := newMemRules()
	return &cmdSetup{
		p: &Plugin{Rules: rules, Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			return nil, errors.New("no lookups here: " + host)
		}},
		rules: rules,
		state: filepath.Join(t.TempDir(), "state"),
		dir:   t.TempDir(),
	}
}

// netns makes a file at a new path, whose inode stands for a namespace's.
func (s *cmdSetup) netns(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// args are a runtime's arguments for container id in netns, with the
// configuration granting grant (a JSON egress annotation, or "").
func (s *cmdSetup) args(t *testing.T, id, netns, managed, grant string) *skel.CmdArgs {
	t.Helper()
	conf := map[string]any{
		"cniVersion": "1.0.0", "name": "n", "type": PluginType,
		"managedCIDRs": []string{managed}, "stateDir": s.state,
		"runtimeConfig": map[string]any{PodAnnotationsCapability: map[string]string{EgressAnnotation: grant}},
		"prevResult": map[string]any{
			"cniVersion": "1.0.0",
			"interfaces": []any{map[string]any{"name": "eth0", "sandbox": netns}},
			"ips":        []any{map[string]any{"interface": 0, "address": "198.18.0.2/24"}},
		},
	}
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return &skel.CmdArgs{ContainerID: id, Netns: netns, IfName: "eth0", StdinData: data}
}

// quietly runs f with the process's standard output, where ADD prints its
// result, sent nowhere.
func quietly(t *testing.T, f func() error) error {
	t.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	stdout := os.Stdout
	os.Stdout = devnull
	defer func() { os.Stdout = stdout }()
	return f()
}

func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

const grantDB = `[{"host":"198.18.5.5","ports":["5432"],"protocol":"tcp"}]`

// TestAddDel: ADD records the attachment and writes the ruleset the grants
// make; DEL removes both and may be repeated; a DEL for a namespace that
// is gone still removes the record.
func TestAddDel(t *testing.T) {
	s := setupCommands(t)
	ns := s.netns(t, "pod1")
	a := s.args(t, "c1", ns, "198.18.0.0/15", grantDB)
	if err := quietly(t, func() error { return s.p.Add(a) }); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	got, err := s.rules.Read(ns)
	if err != nil {
		t.Fatal(err)
	}
	want := BuildRuleset([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")},
		[]Grant{{Host: "198.18.5.5", Addr: netip.MustParseAddr("198.18.5.5"), Protocol: "tcp", Ports: []PortRange{{5432, 5432}}}})
	if !slices.Equal(got.specs(), want.specs()) {
		t.Errorf("ADD wrote\n  %q\nwant\n  %q", got.specs(), want.specs())
	}
	rec, err := readAttachment(stateFile(s.state, "c1", "eth0"))
	if err != nil {
		t.Fatalf("no record after ADD: %v", err)
	}
	if ino, _ := netnsInode(ns); rec.NetNSInode != ino || rec.NetNS != ns || !slices.Equal(rec.Rules, want.specs()) {
		t.Errorf("record %+v: want namespace %s (inode %d) and the rules written", rec, ns, ino)
	}

	for i := range 2 {
		if err := s.p.Del(a); err != nil {
			t.Fatalf("DEL %d: %v", i+1, err)
		}
	}
	if s.rules.has(ns) {
		t.Error("the table is still there after DEL")
	}
	if _, err := os.Stat(stateFile(s.state, "c1", "eth0")); !os.IsNotExist(err) {
		t.Errorf("the record is still there after DEL: %v", err)
	}

	// The runtime may have removed the namespace already.
	ns2 := s.netns(t, "pod2")
	a2 := s.args(t, "c2", ns2, "198.18.0.0/15", "")
	if err := quietly(t, func() error { return s.p.Add(a2) }); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if err := os.Remove(ns2); err != nil {
		t.Fatal(err)
	}
	if err := s.p.Del(a2); err != nil {
		t.Fatalf("DEL after the namespace went: %v", err)
	}
	if _, err := os.Stat(stateFile(s.state, "c2", "eth0")); !os.IsNotExist(err) {
		t.Errorf("the record is still there after DEL: %v", err)
	}
}

// TestAddRecordsBeforeWriting: when the rules cannot be written, ADD fails
// with the record already made, so that DEL (or GC) finds what a
// half-done ADD left.
func TestAddRecordsBeforeWriting(t *testing.T) {
	s := setupCommands(t)
	s.rules.applyErr = errors.New("netlink: operation not permitted")
	ns := s.netns(t, "pod")
	a := s.args(t, "c1", ns, "198.18.0.0/15", grantDB)
	err := quietly(t, func() error { return s.p.Add(a) })
	if cniCode(err) != types.ErrInternal {
		t.Fatalf("ADD with rules that cannot be written: %v, want code %d", err, types.ErrInternal)
	}
	if _, err := readAttachment(stateFile(s.state, "c1", "eth0")); err != nil {
		t.Fatalf("no record after a failed ADD: %v", err)
	}
	if err := s.p.Del(a); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if paths, _ := listAttachments(s.state); len(paths) != 0 {
		t.Errorf("records left after DEL: %v", paths)
	}
}

// TestCheck: CHECK passes after ADD, and fails with a message when the
// table was changed, when the configuration's ranges changed since ADD,
// and for an attachment never added.
func TestCheck(t *testing.T) {
	s := setupCommands(t)
	ns := s.netns(t, "pod")
	a := s.args(t, "c1", ns, "198.18.0.0/15", grantDB)
	if err := quietly(t, func() error { return s.p.Add(a) }); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if err := s.p.Check(a); err != nil {
		t.Fatalf("CHECK after ADD: %v", err)
	}

	moved := s.args(t, "c1", ns, "10.0.0.0/8", grantDB)
	if err := s.p.Check(moved); cniCode(err) != types.ErrInternal {
		t.Errorf("CHECK with other managedCIDRs: %v, want code %d", err, types.ErrInternal)
	}

	rs, _ := s.rules.Read(ns)
	rs.Rules = rs.Rules[:len(rs.Rules)-1]
	if err := s.rules.Apply(ns, rs); err != nil {
		t.Fatal(err)
	}
	if err := s.p.Check(a); cniCode(err) != types.ErrInternal {
		t.Errorf("CHECK with a rule removed: %v, want code %d", err, types.ErrInternal)
	}
	if err := s.rules.Delete(ns); err != nil {
		t.Fatal(err)
	}
	if err := s.p.Check(a); cniCode(err) != types.ErrInternal {
		t.Errorf("CHECK with the table gone: %v, want code %d", err, types.ErrInternal)
	}

	never := s.args(t, "c9", ns, "198.18.0.0/15", "")
	if err := s.p.Check(never); cniCode(err) != types.ErrUnknownContainer {
		t.Errorf("CHECK of an attachment never added: %v, want code %d", err, types.ErrUnknownContainer)
	}
}

// TestGC: GC removes the tables and records of attachments the runtime no
// longer lists, keeps those it lists, and leaves alone the table of a newer
// namespace at a forgotten attachment's path.
func TestGC(t *testing.T) {
	s := setupCommands(t)
	keep, drop, reused := s.netns(t, "keep"), s.netns(t, "drop"), s.netns(t, "reused")
	for id, ns := range map[string]string{"keep": keep, "drop": drop, "reused": reused} {
		if err := quietly(t, func() error { return s.p.Add(s.args(t, id, ns, "198.18.0.0/15", grantDB)) }); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	// The runtime made a new namespace at reused's path (another inode:
	// both exist while it is moved there), which has rules of its own.
	if err := os.Rename(s.netns(t, "newer"), reused); err != nil {
		t.Fatal(err)
	}
	newer := BuildRuleset([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}, nil)
	if err := s.rules.Apply(reused, newer); err != nil {
		t.Fatal(err)
	}

	a := gcArgs(t, s.args(t, "keep", keep, "198.18.0.0/15", ""), map[string]string{"containerID": "keep", "ifname": "eth0"})
	if err := s.p.GC(a); err != nil {
		t.Fatalf("GC: %v", err)
	}

	if !s.rules.has(keep) {
		t.Error("GC removed the table of a valid attachment")
	}
	if s.rules.has(drop) {
		t.Error("GC left the table of a forgotten attachment")
	}
	if got, _ := s.rules.Read(reused); !slices.Equal(got.specs(), newer.specs()) {
		t.Error("GC changed the table of a newer namespace at a forgotten attachment's path")
	}
	paths, _ := listAttachments(s.state)
	if want := []string{stateFile(s.state, "keep", "eth0")}; !slices.Equal(paths, want) {
		t.Errorf("records after GC: %v, want %v", paths, want)
	}
}

// TestStatus: STATUS answers "plugin not available" (50) when the rules
// cannot be written.
func TestStatus(t *testing.T) {
	s := setupCommands(t)
	a := s.args(t, "c1", s.netns(t, "pod"), "198.18.0.0/15", "")
	if err := s.p.Status(a); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	s.rules.readyErr = errors.New("nftables: protocol not supported")
	if err := s.p.Status(a); cniCode(err) != errPluginNotAvailable {
		t.Errorf("STATUS without nftables: %v, want code %d", err, errPluginNotAvailable)
	}
}

// withNetwork is a's configuration with another network name and
// interface, as a runtime passes for a Pod's second network.
func withNetwork(t *testing.T, a *skel.CmdArgs, network, ifName string) *skel.CmdArgs {
	t.Helper()
	var conf map[string]any
	if err := json.Unmarshal(a.StdinData, &conf); err != nil {
		t.Fatal(err)
	}
	conf["name"] = network
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return &skel.CmdArgs{ContainerID: a.ContainerID, Netns: a.Netns, IfName: ifName, StdinData: data}
}

// gcArgs are GC's arguments for a's network, listing valid as its
// attachments.
func gcArgs(t *testing.T, a *skel.CmdArgs, valid ...map[string]string) *skel.CmdArgs {
	t.Helper()
	var conf map[string]any
	if err := json.Unmarshal(a.StdinData, &conf); err != nil {
		t.Fatal(err)
	}
	delete(conf, "prevResult")
	conf["cniVersion"] = "1.1.0"
	conf["cni.dev/valid-attachments"] = valid
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return &skel.CmdArgs{StdinData: data}
}

// TestGCKeepsOtherNetworks: GC is called for one network and lists that
// network's attachments only; the attachments of another network
// sharing the state directory are not its to collect. GC of network "n"
// used to remove the table and record of a Pod on network "other".
func TestGCKeepsOtherNetworks(t *testing.T) {
	s := setupCommands(t)
	ns := s.netns(t, "pod")
	other := withNetwork(t, s.args(t, "c1", ns, "198.18.0.0/15", grantDB), "other", "eth0")
	if err := quietly(t, func() error { return s.p.Add(other) }); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if err := s.p.GC(gcArgs(t, s.args(t, "c9", s.netns(t, "unused"), "198.18.0.0/15", ""))); err != nil {
		t.Fatalf("GC of network n: %v", err)
	}
	if !s.rules.has(ns) {
		t.Error("GC of network n removed the table of an attachment of network other")
	}
	if paths, _ := listAttachments(s.state); len(paths) != 1 {
		t.Errorf("records after GC of another network: %v, want the one of network other", paths)
	}
	if err := s.p.GC(gcArgs(t, other)); err != nil {
		t.Fatalf("GC of network other: %v", err)
	}
	if s.rules.has(ns) {
		t.Error("GC of network other, listing none, left its attachment's table")
	}
}

// TestDelLeavesTheOtherAttachment: a Pod on two networks that both chain
// the plugin has one table in its namespace. DEL of one attachment (and
// GC of a forgotten one) leaves the table, with the other attachment's
// rules, while that one is recorded; the last one removes it. DEL used to
// remove the table, leaving the Pod's other network unguarded.
func TestDelLeavesTheOtherAttachment(t *testing.T) {
	s := setupCommands(t)
	ns := s.netns(t, "pod")
	first := s.args(t, "c1", ns, "198.18.0.0/15", grantDB)
	second := withNetwork(t, s.args(t, "c1", ns, "10.96.0.0/12", grantDB), "other", "net1")
	for _, a := range []*skel.CmdArgs{second, first} {
		if err := quietly(t, func() error { return s.p.Add(a) }); err != nil {
			t.Fatalf("ADD %s: %v", a.IfName, err)
		}
	}
	if err := s.p.Del(first); err != nil {
		t.Fatalf("DEL of eth0: %v", err)
	}
	if err := s.p.Check(second); err != nil {
		t.Errorf("CHECK of net1 after DEL of eth0: %v; want its rules in the table", err)
	}
	// GC of network other, which no longer lists net1.
	if err := s.p.GC(gcArgs(t, second)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if s.rules.has(ns) {
		t.Error("the table is left after the Pod's last attachment is gone")
	}
}

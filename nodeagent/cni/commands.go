package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/google/nftables/expr"

	buildversion "github.com/bindery-dev/bindery/internal/version"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("0.4.0", "1.0.0", "1.1.0")

// Codes STATUS answers with (CNI spec 1.1.0, "Well-known error codes").
const (
	errPluginNotAvailable uint = 50
)

// addTimeout bounds one ADD: the runtime waits for it.
const addTimeout = 20 * time.Second

// Plugin holds the commands: they decide what a Pod's table holds and
// keep the records of attachments; Rules writes, reads and deletes the
// tables; Lookup resolves endpoint host names.
type Plugin struct {
	Lookup lookupFunc
	Rules  Rules
}

// Rules is where the plugin's table lives: the nftables of a Pod's network
// namespace (NFTables), or anything that keeps rulesets by namespace path
// the same way, so that the commands are tested without root.
type Rules interface {
	// Apply makes the table in the namespace at netns hold exactly rs,
	// in one step.
	Apply(netns string, rs Ruleset) error
	// Delete removes the table from the namespace at netns. A table, or
	// a namespace, that is gone is not an error.
	Delete(netns string) error
	// Read returns the table's rules and sets, or an error wrapping
	// errNoTable when the namespace has none.
	Read(netns string) (Ruleset, error)
	// Ready reports why the rules cannot be written on this node, or nil.
	Ready() error
}

// NewPlugin returns the plugin as bindery-cni runs it: nftables, and the
// system's resolver.
func NewPlugin() *Plugin { return &Plugin{Lookup: systemLookup, Rules: NFTables{}} }

// About is what the plugin says of itself when run without a command:
// its name and software version, as the reference plugins say theirs
// (the CNI VERSION command reports the spec versions it speaks).
func About() string {
	return PluginType + " " + buildversion.String() + ": a Pod reaches the managed services it is bound to, and no others"
}

// Funcs returns the plugin's commands for skel.PluginMainFuncs.
func Funcs() skel.CNIFuncs {
	p := NewPlugin()
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

// Add writes the Pod's rules and records the attachment, then passes the
// previous plugin's result on unchanged.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	c, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if c.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult: missing; "+PluginType+" must follow a plugin that configures the interface", "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), addTimeout)
	defer cancel()
	value, err := egressValue(ctx, c, args.Args)
	if err != nil {
		return err
	}
	eps, err := ParseEgress(value)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "Pod annotation "+EgressAnnotation, err.Error())
	}
	grants, missing, err := resolveGrants(ctx, eps, p.Lookup)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "resolve granted endpoints", err.Error())
	}
	ino, err := netnsInode(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "CNI_NETNS", err.Error())
	}
	rs := BuildRuleset(c.managed, grants)
	a := &attachment{
		Network:      c.Name,
		ContainerID:  args.ContainerID,
		IfName:       args.IfName,
		NetNS:        args.Netns,
		NetNSInode:   ino,
		ManagedCIDRs: c.managed,
		Grants:       grants,
		Unresolved:   missing,
		Rules:        rs.specs(),
	}
	// Recorded first, so that DEL and GC find a table that a crash
	// between the two steps would leave.
	if err := writeAttachment(c.StateDir, a); err != nil {
		return types.NewError(types.ErrIOFailure, "record attachment", err.Error())
	}
	if err := p.Rules.Apply(args.Netns, rs); err != nil {
		return types.NewError(types.ErrInternal, "write egress rules", err.Error())
	}
	return types.PrintResult(c.PrevResult, c.CNIVersion)
}

// Del removes the attachment's table and record. It succeeds when either is
// already gone, and when the namespace is, as the spec asks of DEL.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	c, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	path := stateFile(c.StateDir, args.ContainerID, args.IfName)
	if args.Netns != "" {
		if err := p.release(c.StateDir, args.Netns, path); err != nil {
			return types.NewError(types.ErrInternal, "delete egress rules", err.Error())
		}
	}
	if err := removeAttachment(path); err != nil {
		return types.NewError(types.ErrIOFailure, "remove attachment record", err.Error())
	}
	return nil
}

// Check verifies that the namespace holds exactly the rules ADD wrote, and
// that they are still the rules the configuration and grants make.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	c, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if c.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult: missing", "")
	}
	a, err := readAttachment(stateFile(c.StateDir, args.ContainerID, args.IfName))
	if err != nil {
		return types.NewError(types.ErrUnknownContainer, "no attachment recorded for this container and interface", err.Error())
	}
	want := BuildRuleset(c.managed, a.Grants)
	if !slices.Equal(want.specs(), a.Rules) {
		return types.NewError(types.ErrInternal, "egress rules are out of date: managedCIDRs changed since ADD", "")
	}
	got, err := p.Rules.Read(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInternal, "read egress rules", err.Error())
	}
	if err := sameRuleset(got, want); err != nil {
		return types.NewError(types.ErrInternal, "egress rules differ from what ADD wrote", err.Error())
	}
	return nil
}

// Status reports whether the plugin can do its work on this node: write its
// state and its rules.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	c, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return types.NewError(errPluginNotAvailable, "state directory "+c.StateDir, err.Error())
	}
	f, err := os.CreateTemp(c.StateDir, ".status-*")
	if err != nil {
		return types.NewError(errPluginNotAvailable, "state directory "+c.StateDir+" is not writable", err.Error())
	}
	f.Close()
	os.Remove(f.Name())
	if err := p.Rules.Ready(); err != nil {
		return types.NewError(errPluginNotAvailable, "egress rules", err.Error())
	}
	return nil
}

// GC removes the tables and records of attachments missing from
// cni.dev/valid-attachments. A table is removed only from the namespace the
// attachment was made in, not from a newer one at the same path.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	c, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	valid := make(map[types.GCAttachment]bool, len(c.ValidAttachments))
	for _, v := range c.ValidAttachments {
		valid[v] = true
	}
	paths, err := listAttachments(c.StateDir)
	if err != nil {
		return types.NewError(types.ErrIOFailure, "list attachments", err.Error())
	}
	var errs []error
	for _, path := range paths {
		a, err := readAttachment(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if valid[types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}] || (a.Network != "" && a.Network != c.Name) {
			continue
		}
		if ino, err := netnsInode(a.NetNS); err == nil && ino == a.NetNSInode {
			if err := p.release(c.StateDir, a.NetNS, path); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := removeAttachment(path); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrInternal, "garbage-collect attachments", err.Error())
	}
	return nil
}

// release takes the attachment recorded at path out of the namespace at
// netns. A Pod's namespace has one table, whichever of its networks chain
// the plugin: it goes, unless another attachment recorded in dir is still
// in that namespace (a Pod on two networks), whose rules it then holds.
func (p *Plugin) release(dir, netns, path string) error {
	ino, err := netnsInode(netns)
	if err != nil {
		// No namespace there: no table to delete.
		return p.Rules.Delete(netns)
	}
	paths, err := listAttachments(dir)
	if err != nil {
		return err
	}
	for _, other := range paths {
		if other == path {
			continue
		}
		a, err := readAttachment(other)
		if err != nil || a.NetNS != netns || a.NetNSInode != ino {
			continue
		}
		return p.Rules.Apply(netns, BuildRuleset(a.ManagedCIDRs, a.Grants))
	}
	return p.Rules.Delete(netns)
}

// sameRuleset compares what was read from the kernel with what is wanted:
// the rules in order, expression by expression (a rule changed behind its
// comment is caught), and each wanted set's elements, in any order. Sets
// that no rule looks up are not compared.
func sameRuleset(got, want Ruleset) error {
	gs, ws := ruleSpecs(got.Rules), ruleSpecs(want.Rules)
	if !slices.Equal(gs, ws) {
		return fmt.Errorf("want rules [%s], have [%s]", strings.Join(ws, "; "), strings.Join(gs, "; "))
	}
	for i := range want.Rules {
		if !reflect.DeepEqual(forCompare(got.Rules[i].Exprs), forCompare(want.Rules[i].Exprs)) {
			return fmt.Errorf("rule %d (%s) has other expressions than its comment says", i, want.Rules[i].Spec)
		}
	}
	for _, w := range want.Sets {
		i := slices.IndexFunc(got.Sets, func(s Set) bool { return s.Name == w.Name })
		if i < 0 {
			return fmt.Errorf("set %s is missing", w.Name)
		}
		g := got.Sets[i]
		if g.IPv6 != w.IPv6 || g.Ports != w.Ports {
			return fmt.Errorf("set %s is not of the kind the rules look up", w.Name)
		}
		if !slices.Equal(elementKeys(g.Elements), elementKeys(w.Elements)) {
			return fmt.Errorf("set %s holds %d elements other than the %d granted", w.Name, len(g.Elements), len(w.Elements))
		}
	}
	return nil
}

// forCompare returns exprs with what the kernel does not report back
// cleared: a lookup's batch set ID.
func forCompare(exprs []expr.Any) []expr.Any {
	out := slices.Clone(exprs)
	for i, e := range out {
		if l, ok := e.(*expr.Lookup); ok {
			l2 := *l
			l2.SetID = 0
			out[i] = &l2
		}
	}
	return out
}

// elementKeys returns the elements' keys and key ends, sorted.
func elementKeys(els []Element) []string {
	out := make([]string, len(els))
	for i, e := range els {
		out[i] = string(e.Key) + "\x00" + string(e.KeyEnd)
	}
	slices.Sort(out)
	return out
}

func ruleSpecs(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Spec
	}
	return out
}

// netnsInode identifies the namespace at path.
func netnsInode(path string) (uint64, error) {
	if path == "" {
		return 0, errors.New("no network namespace given")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat network namespace %s: %w", path, err)
	}
	return st.Ino, nil
}

package cni

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("0.4.0", "1.0.0", "1.1.0")

// Codes STATUS answers with (CNI spec 1.1.0, "Well-known error codes").
const (
	errPluginNotAvailable uint = 50
)

// addTimeout bounds one ADD: the runtime waits for it.
const addTimeout = 20 * time.Second

// Plugin holds the commands; Lookup resolves endpoint host names.
type Plugin struct {
	Lookup lookupFunc
}

// Funcs returns the plugin's commands for skel.PluginMainFuncs.
func Funcs() skel.CNIFuncs {
	p := &Plugin{Lookup: systemLookup}
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
	if err := applyRuleset(args.Netns, rs); err != nil {
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
	// A namespace that is gone, or a path that no longer holds one (the
	// runtime unmounted it), has no table left to delete.
	if args.Netns != "" && ns.IsNSorErr(args.Netns) == nil {
		if err := deleteTable(args.Netns); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	got, err := readRuleset(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInternal, "read egress rules", err.Error())
	}
	if err := sameRuleset(got, want); err != nil {
		return types.NewError(types.ErrInternal, "egress rules differ from what ADD wrote", err.Error())
	}
	return nil
}

// Status reports whether the plugin can do its work on this node: write its
// state and talk to nftables.
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
	conn, err := nftables.New()
	if err == nil {
		_, err = conn.ListTablesOfFamily(nftables.TableFamilyINet)
	}
	if err != nil {
		return types.NewError(errPluginNotAvailable, "nftables", err.Error())
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
		if valid[types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}] {
			continue
		}
		if ino, err := netnsInode(a.NetNS); err == nil && ino == a.NetNSInode {
			if err := deleteTable(a.NetNS); err != nil && !errors.Is(err, fs.ErrNotExist) {
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

package cni

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// errNoTable means the plugin's table is not in the namespace.
var errNoTable = errors.New("table inet " + tableName + " is missing")

// nftIn opens an nftables connection to the network namespace at path; fd
// must stay open while the connection is used.
func nftIn(path string) (*nftables.Conn, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("nftables in network namespace %s: %w", path, err)
	}
	return c, f, nil
}

// NFTables keeps the plugin's table in the nftables of each Pod's network
// namespace: the Rules bindery-cni uses.
type NFTables struct{}

// Apply is applyRuleset.
func (NFTables) Apply(netns string, rs Ruleset) error { return applyRuleset(netns, rs) }

// Read is readRuleset.
func (NFTables) Read(netns string) (Ruleset, error) { return readRuleset(netns) }

// Delete removes the table. A path that no longer holds a namespace (the
// runtime unmounted it) has no table left to delete.
func (NFTables) Delete(netns string) error {
	if ns.IsNSorErr(netns) != nil {
		return nil
	}
	if err := deleteTable(netns); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Ready checks that this process can talk to nftables.
func (NFTables) Ready() error {
	conn, err := nftables.New()
	if err == nil {
		_, err = conn.ListTablesOfFamily(nftables.TableFamilyINet)
	}
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// applyRuleset makes the plugin's table in the namespace at path hold
// exactly rs, in one transaction (one netlink batch): the Pod never sees it
// half made. The chain and sets are created if missing and flushed
// otherwise; deleting the table instead would cost a kernel RCU grace
// period (about 15 ms here) on every ADD. Only when that fails, for a chain
// or set that exists with other settings, is the table deleted and made
// again.
func applyRuleset(path string, rs Ruleset) error {
	c, f, err := nftIn(path)
	if err != nil {
		return err
	}
	defer f.Close()
	write := func(recreate bool) error {
		t := table()
		c.AddTable(t)
		if recreate {
			c.DelTable(t)
			c.AddTable(t)
		}
		ch := c.AddChain(chain(t))
		c.FlushChain(ch)
		ids := map[string]uint32{}
		for _, s := range rs.Sets {
			ns := nftSet(t, s)
			if err := c.AddSet(ns, nil); err != nil {
				return err
			}
			ids[s.Name] = ns.ID
			c.FlushSet(ns)
			if len(s.Elements) == 0 {
				continue
			}
			els := make([]nftables.SetElement, len(s.Elements))
			for i, e := range s.Elements {
				els[i] = nftables.SetElement{Key: e.Key, KeyEnd: e.KeyEnd}
			}
			if err := c.SetAddElements(ns, els); err != nil {
				return err
			}
		}
		for _, r := range rs.Rules {
			exprs := slices.Clone(r.Exprs)
			for i, e := range exprs {
				if l, ok := e.(*expr.Lookup); ok {
					// The set is made in this same batch: the rule
					// names it by its batch ID too.
					l2 := *l
					l2.SetID = ids[l.SetName]
					exprs[i] = &l2
				}
			}
			c.AddRule(&nftables.Rule{
				Table:    t,
				Chain:    ch,
				Exprs:    exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, r.Spec),
			})
		}
		return c.Flush()
	}
	if err := write(false); err != nil {
		if err := write(true); err != nil {
			return fmt.Errorf("write table inet %s in network namespace %s: %w", tableName, path, err)
		}
	}
	return nil
}

// deleteTable removes the plugin's table from the namespace at path, and
// nothing else; a table that is not there is not an error.
func deleteTable(path string) error {
	c, f, err := nftIn(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := c.ListTableOfFamily(tableName, nftables.TableFamilyINet); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("look for table inet %s in network namespace %s: %w", tableName, path, err)
	}
	c.DelTable(table())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete table inet %s in network namespace %s: %w", tableName, path, err)
	}
	return nil
}

// readRuleset returns the rules in the plugin's chain, in order, with
// their comments as Spec and counters zeroed, after checking that the chain
// is hooked as chain() makes it; and the plugin's sets with their elements
// (without Specs, which the kernel does not keep), in the kernel's order.
func readRuleset(path string) (Ruleset, error) {
	c, f, err := nftIn(path)
	if err != nil {
		return Ruleset{}, err
	}
	defer f.Close()
	t, err := c.ListTableOfFamily(tableName, nftables.TableFamilyINet)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Ruleset{}, errNoTable
		}
		return Ruleset{}, fmt.Errorf("read table inet %s: %w", tableName, err)
	}
	got, err := c.ListChain(t, chainName)
	if err != nil {
		return Ruleset{}, fmt.Errorf("read chain %s of table inet %s: %w", chainName, tableName, err)
	}
	want := chain(t)
	if got.Hooknum == nil || *got.Hooknum != *want.Hooknum || got.Priority == nil || *got.Priority != *want.Priority ||
		got.Type != want.Type || got.Policy == nil || *got.Policy != *want.Policy {
		return Ruleset{}, fmt.Errorf("chain %s of table inet %s is not a filter chain on output with policy accept", chainName, tableName)
	}
	rules, err := c.GetRules(t, got)
	if err != nil {
		return Ruleset{}, fmt.Errorf("read rules of table inet %s: %w", tableName, err)
	}
	var rs Ruleset
	for _, r := range rules {
		spec, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				c.Bytes, c.Packets = 0, 0
			}
		}
		rs.Rules = append(rs.Rules, Rule{Spec: spec, Exprs: r.Exprs})
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return Ruleset{}, fmt.Errorf("read sets of table inet %s: %w", tableName, err)
	}
	for _, s := range sets {
		set := Set{Name: s.Name, IPv6: strings.HasPrefix(s.KeyType.Name, nftables.TypeIP6Addr.Name), Ports: s.Concatenation && s.Interval}
		if want := nftSet(t, set).KeyType.Name; s.KeyType.Name != want || s.IsMap {
			return Ruleset{}, fmt.Errorf("set %s of table inet %s has key type %s", s.Name, tableName, s.KeyType.Name)
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			return Ruleset{}, fmt.Errorf("read elements of set %s of table inet %s: %w", s.Name, tableName, err)
		}
		for _, e := range els {
			set.Elements = append(set.Elements, Element{Key: e.Key, KeyEnd: e.KeyEnd})
		}
		rs.Sets = append(rs.Sets, set)
	}
	return rs, nil
}

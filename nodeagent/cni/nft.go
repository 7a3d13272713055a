package cni

import (
	"errors"
	"fmt"
	"os"

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

// applyRules makes the plugin's chain in the namespace at path hold exactly
// rules, in one transaction: the Pod never sees it half made. The chain is
// created if missing and flushed otherwise; deleting the table instead would
// cost a kernel RCU grace period (about 15 ms here) on every ADD. Only when
// that fails, for a chain that exists with other hook settings, is the table
// deleted and made again.
func applyRules(path string, rules []Rule) error {
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
		for _, r := range rules {
			c.AddRule(&nftables.Rule{
				Table:    t,
				Chain:    ch,
				Exprs:    r.Exprs,
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

// readRules returns the rules in the plugin's chain, in order, with their
// comments as Spec and counters zeroed, after checking that the chain is
// hooked as chain() makes it.
func readRules(path string) ([]Rule, error) {
	c, f, err := nftIn(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := c.ListTableOfFamily(tableName, nftables.TableFamilyINet)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errNoTable
		}
		return nil, fmt.Errorf("read table inet %s: %w", tableName, err)
	}
	got, err := c.ListChain(t, chainName)
	if err != nil {
		return nil, fmt.Errorf("read chain %s of table inet %s: %w", chainName, tableName, err)
	}
	want := chain(t)
	if got.Hooknum == nil || *got.Hooknum != *want.Hooknum || got.Priority == nil || *got.Priority != *want.Priority ||
		got.Type != want.Type || got.Policy == nil || *got.Policy != *want.Policy {
		return nil, fmt.Errorf("chain %s of table inet %s is not a filter chain on output with policy accept", chainName, tableName)
	}
	rs, err := c.GetRules(t, got)
	if err != nil {
		return nil, fmt.Errorf("read rules of table inet %s: %w", tableName, err)
	}
	out := make([]Rule, 0, len(rs))
	for _, r := range rs {
		spec, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				c.Bytes, c.Packets = 0, 0
			}
		}
		out = append(out, Rule{Spec: spec, Exprs: r.Exprs})
	}
	return out, nil
}

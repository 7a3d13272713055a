package catalog_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestPageOfNamespacesReadsAPageOfEach: a page of a list limited to
// several namespaces (a token's or a session's) holds their objects in
// order, across pages, and can be read as at most a page's rows of each
// namespace. Through namespace = ANY, PostgreSQL 15 read every row of the
// namespaces and sorted them for each page.
func TestPageOfNamespacesReadsAPageOfEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	var want []string
	for _, ns := range []string{"team-a", "team-b", "team-c", "team-d"} {
		for i := range 120 {
			in := newInstance(fmt.Sprintf("db-%03d", i), catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"})
			in.Namespace = ns
			if _, err := s.CreateInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
			if ns == "team-b" || ns == "team-d" {
				want = append(want, ns+"/"+in.Name)
			}
		}
	}
	scope := []string{"team-d", "team-b", "team-d"}
	opts := catalog.ListOptions{Namespaces: scope, Limit: 7}
	var got []string
	for pages := 0; pages < 100; pages++ {
		l, err := s.ListInstances(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range l.Items {
			got = append(got, in.Namespace+"/"+in.Name)
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages of %v hold %d objects (first %.3v), want the %d of team-b and team-d in order", scope, len(got), got, len(want))
	}

	sql, args, err := catalog.InstancePage(catalog.ListOptions{Namespaces: scope, Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	// At a few hundred rows, sorting a namespace's rows costs the planner
	// next to nothing; with sorting priced out, as it is for a namespace
	// of thousands, the plan shows whether the statement can be read in
	// order, a page of each namespace. Through = ANY it could only walk
	// the whole index in order, through other namespaces' rows (team-a's
	// and team-c's here).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, tx, sql, args...)
	read := 0
	node := regexp.MustCompile(`on instances .*actual rows=([0-9]+) loops=([0-9]+)`)
	for _, line := range plan {
		if m := node.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			loops, _ := strconv.Atoi(m[2])
			read += n * loops
		}
	}
	if read == 0 || read > 2*8 {
		t.Errorf("a page of 7 of 2 namespaces read %d instances, want at most 8 of each:\n%s", read, strings.Join(plan, "\n"))
	}
}

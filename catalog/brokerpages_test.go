package catalog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestListBrokersWithNamespaced: the cluster's brokers and the namespaced
// ones come as one list, the cluster's first, then by namespace and name,
// a page at a time; limited to namespaces, it holds the cluster's and
// theirs only.
func TestListBrokersWithNamespaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	for _, nb := range [][2]string{{"team-b", "x"}, {"", "b"}, {"team-a", "y"}, {"", "a"}, {"team-c", "z"}} {
		b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "http://127.0.0.1:1"}}
		b.Namespace, b.Name = nb[0], nb[1]
		if _, err := s.CreateBroker(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		namespaces []string
		want       string
	}{
		{nil, "/a /b | team-a/y team-b/x | team-c/z"},
		{[]string{"team-b", "team-a"}, "/a /b | team-a/y team-b/x"},
		{[]string{"team-c"}, "/a /b | team-c/z"},
	} {
		var pages []string
		opts := catalog.ListOptions{Namespaces: tc.namespaces, Limit: 2}
		for {
			l, err := s.ListBrokersWithNamespaced(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, b := range l.Items {
				names = append(names, b.Namespace+"/"+b.Name)
			}
			pages = append(pages, strings.Join(names, " "))
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
		if got := strings.Join(pages, " | "); got != tc.want {
			t.Errorf("namespaces %v: pages %q, want %q", tc.namespaces, got, tc.want)
		}
	}
}

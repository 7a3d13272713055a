package restapi_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/serve/servetest"
	"github.com/bindery-dev/bindery/restapi"
)

// TestQuotaMetrics: the namespaces' instances, bindings and brokers, and
// the strictest limit on each with where it comes from, at every scrape.
func TestQuotaMetrics(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	ctx := context.Background()
	if _, err := bb.store.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Instances: new(10), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := bb.store.SetQuota(ctx, &catalog.Quota{Namespace: "", Bindings: new(4), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	three, one := int64(3), int64(1)
	if err := bb.store.PutResourceQuota(ctx, catalog.ResourceQuota{Namespace: "team-b", Name: "objects", Instances: &three, Brokers: &one}); err != nil {
		t.Fatal(err)
	}
	own := &catalog.Broker{Spec: catalog.BrokerSpec{URL: "https://broker.example"}}
	own.Name, own.Namespace = "own", "team-c"
	if _, err := bb.store.CreateBroker(ctx, own, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []map[string]any{instanceIn("team-a", "db", "small"), instanceIn("team-a", "db2", "small"), instanceIn("team-c", "db", "small")} {
		bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/instances", in))
	}
	bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/bindings", map[string]any{"name": "app", "namespace": "team-a", "spec": map[string]any{"instanceRef": map[string]any{"name": "db"}}}))
	want := `
# HELP bindery_namespace_bindings Bindings of the namespace, those being deleted included.
# TYPE bindery_namespace_bindings gauge
bindery_namespace_bindings{namespace="team-a"} 1
bindery_namespace_bindings{namespace="team-b"} 0
bindery_namespace_bindings{namespace="team-c"} 0
# HELP bindery_namespace_bindings_limit The strictest limit on the namespace's bindings; source is namespace, default or ResourceQuota/NAME.
# TYPE bindery_namespace_bindings_limit gauge
bindery_namespace_bindings_limit{namespace="team-b",source="default"} 4
bindery_namespace_bindings_limit{namespace="team-c",source="default"} 4
# HELP bindery_namespace_brokers Brokers of the namespace's own.
# TYPE bindery_namespace_brokers gauge
bindery_namespace_brokers{namespace="team-a"} 0
bindery_namespace_brokers{namespace="team-b"} 0
bindery_namespace_brokers{namespace="team-c"} 1
# HELP bindery_namespace_brokers_limit The strictest limit on the namespace's brokers; source is server (--max-brokers-per-namespace) or ResourceQuota/NAME.
# TYPE bindery_namespace_brokers_limit gauge
bindery_namespace_brokers_limit{namespace="team-a",source="server"} 16
bindery_namespace_brokers_limit{namespace="team-b",source="ResourceQuota/objects"} 1
bindery_namespace_brokers_limit{namespace="team-c",source="server"} 16
# HELP bindery_namespace_instances Instances of the namespace, those being deleted included.
# TYPE bindery_namespace_instances gauge
bindery_namespace_instances{namespace="team-a"} 2
bindery_namespace_instances{namespace="team-b"} 0
bindery_namespace_instances{namespace="team-c"} 1
# HELP bindery_namespace_instances_limit The strictest limit on the namespace's instances; source is namespace, default or ResourceQuota/NAME.
# TYPE bindery_namespace_instances_limit gauge
bindery_namespace_instances_limit{namespace="team-a",source="namespace"} 10
bindery_namespace_instances_limit{namespace="team-b",source="ResourceQuota/objects"} 3
`
	if err := testutil.CollectAndCompare(restapi.NewQuotaCollector(bb.store, nil), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestNamespaceMetricsNeedATokenForAllNamespaces: the server's /metrics
// names the namespaces and what each holds, and the brokers' catalogue
// fetches, only to a scrape with a token for all namespaces. Without a
// token, or with one limited to team-a, it has the process's metrics but
// no namespace's, as GET /namespaces shows such a token only its own.
func TestNamespaceMetricsNeedATokenForAllNamespaces(t *testing.T) {
	t.Parallel()
	bb := setup(t)
	bb.registerBindery("bindery")
	ctx := t.Context()
	for _, in := range []map[string]any{instanceIn("team-a", "db", "small"), instanceIn("team-b", "secret", "small")} {
		bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/instances", in))
	}
	bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/brokers", map[string]any{
		"name": "own", "namespace": "team-b", "url": bb.brokerURL,
		"auth": map[string]any{"basic": map[string]any{"username": brokerUser, "password": brokerPass}},
	}))
	limited, _, err := bb.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleAdmin, Namespaces: []string{"team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- restapi.Run(runCtx, &restapi.Config{Store: bb.store, Logger: slog.New(slog.DiscardHandler), RelistCheck: time.Minute}, l)
	}()
	t.Cleanup(func() { stop(); <-done })
	scrape := func(token string) string { return servetest.Scrape(t, l.Addr().String(), token) }
	for who, token := range map[string]string{"no token": "", "a token of team-a": limited, "a token that is no token": "bdy_nope"} {
		got := scrape(token)
		if strings.Contains(got, "bindery_namespace_") || strings.Contains(got, "team-b") {
			t.Errorf("/metrics with %s names the namespaces:\n%s", who, servetest.Lines(got, "namespace"))
		}
		if strings.Contains(got, "bindery_catalog_relists_total") {
			t.Errorf("/metrics with %s names the brokers' fetches:\n%s", who, servetest.Lines(got, "relists"))
		}
		if !strings.Contains(got, "go_goroutines") || !strings.Contains(got, "bindery_api_token_requests") {
			t.Errorf("/metrics with %s lacks the process's metrics", who)
		}
	}
	got := scrape(bb.admin)
	if !strings.Contains(got, `bindery_namespace_instances{namespace="team-b"} 1`) ||
		!strings.Contains(got, `bindery_catalog_relists_total{broker="own",namespace="team-b",outcome="stored"} 1`) ||
		!strings.Contains(got, `bindery_catalog_relists_total{broker="bindery",namespace="",outcome="stored"} 1`) {
		t.Errorf("/metrics with a token for all namespaces lacks the namespaces' usage or their brokers' fetches:\n%s", servetest.Lines(got, "namespace"))
	}
}

package controller_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/serve/servetest"
)

// TestNamespacedBrokerMetricsNeedATokenForAllNamespaces: the engine's
// /metrics, which deploy opens to Pods of every namespace, names a
// namespaced broker (its requests in flight, its line, its breaker) only
// to a scrape with a token for all namespaces. Without a token, or with
// team-b's, it has the cluster's brokers and the process's series, and
// nothing of team-a's broker.
func TestNamespacedBrokerMetricsNeedATokenForAllNamespaces(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.noEngine = true }) // controller.Run's, below
	ctx := t.Context()
	e.registerFake()
	teamFake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: teamFake.URL()}}
	b.Name, b.Namespace = "secret-broker", "team-a"
	b, err := e.store.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	all, _, err := e.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	teamB, _, err := e.store.IssueToken(ctx, catalog.TokenRequest{Role: catalog.RoleAdmin, Namespaces: []string{"team-b"}})
	if err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- controller.Run(runCtx, controller.Config{Store: e.store, Workers: 2}, l) }()
	t.Cleanup(func() { stop(); <-done })

	cluster := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	team := e.createInstance("db", "", "", nil, func(in *catalog.Instance) {
		in.Namespace = "team-a"
		in.Spec = catalog.InstanceSpec{ServiceClassExternalName: osbtest.DefaultService, ServicePlanExternalName: osbtest.PlanSync}
	})
	e.waitInstance(cluster.ID, "Ready", instanceReady)
	e.waitInstance(team.ID, "Ready", instanceReady)

	scrape := func(token string) string { return servetest.Scrape(t, l.Addr().String(), token) }
	const clusterSeries, teamSeries = `bindery_controller_broker_inflight{broker="fake"}`, `bindery_controller_broker_inflight{broker="team-a/secret-broker"}`
	for who, token := range map[string]string{"no token": "", "team-b's token": teamB, "a token that is no token": "bdy_nope"} {
		got := scrape(token)
		if strings.Contains(got, "team-a") || strings.Contains(got, "secret-broker") {
			t.Errorf("/metrics with %s names team-a's broker:\n%s", who, servetest.Lines(got, "broker="))
		}
		if !strings.Contains(got, clusterSeries) || !strings.Contains(got, "go_goroutines") {
			t.Errorf("/metrics with %s lacks the cluster's broker or the process's series:\n%s", who, servetest.Lines(got, "broker="))
		}
	}
	if got := scrape(all); !strings.Contains(got, teamSeries) || !strings.Contains(got, clusterSeries) {
		t.Errorf("/metrics with a token for all namespaces lacks a broker:\n%s", servetest.Lines(got, "broker="))
	}
}

package controller_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
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

	scrape := func(token string) string {
		t.Helper()
		var body string
		eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.Addr().String()+"/metrics", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /metrics: %d %v", resp.StatusCode, err)
			}
			body = string(b)
			return nil
		})
		return body
	}
	const clusterSeries, teamSeries = `bindery_controller_broker_inflight{broker="fake"}`, `bindery_controller_broker_inflight{broker="team-a/secret-broker"}`
	for who, token := range map[string]string{"no token": "", "team-b's token": teamB, "a token that is no token": "bdy_nope"} {
		got := scrape(token)
		if strings.Contains(got, "team-a") || strings.Contains(got, "secret-broker") {
			t.Errorf("/metrics with %s names team-a's broker:\n%s", who, grepLines(got, "broker="))
		}
		if !strings.Contains(got, clusterSeries) || !strings.Contains(got, "go_goroutines") {
			t.Errorf("/metrics with %s lacks the cluster's broker or the process's series:\n%s", who, grepLines(got, "broker="))
		}
	}
	if got := scrape(all); !strings.Contains(got, teamSeries) || !strings.Contains(got, clusterSeries) {
		t.Errorf("/metrics with a token for all namespaces lacks a broker:\n%s", grepLines(got, "broker="))
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

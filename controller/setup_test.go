package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	t      testing.TB
	pool   *pgxpool.Pool
	keys   *keyring.Keyring
	store  *catalog.Store
	logs   *syncbuf.Buffer
	stop   func()
	opts   engineOptions
	broker string
	// registry holds the running engine's metrics.
	registry *prometheus.Registry
}

type engineOptions struct {
	timeout time.Duration
	kube    kubernetes.Interface
	workers int
	// retryBase and retryCap are the backoff (small, so tests run fast);
	// maxPolling the platform's maximum polling duration.
	retryBase, retryCap time.Duration
	maxPolling          time.Duration
	// maxInflight, breakerFailures and breakerWait are the bulkheads'
	// (0: the engine's defaults). Tests that are not about the breaker
	// keep it shut: their brokers fail on purpose.
	maxInflight     int
	breakerFailures int
	breakerWait     time.Duration
	// kubeTimeout bounds each Kubernetes call (0: the default).
	kubeTimeout time.Duration
	// noEngine: setup starts none; the test runs its own.
	noEngine bool
}

// setup gives a test a catalog on its own database and a running engine.
func setup(t testing.TB, opts ...func(*engineOptions)) *env {
	t.Helper()
	o := engineOptions{timeout: 2 * time.Second, workers: 4, retryBase: 50 * time.Millisecond, retryCap: 2 * time.Second, breakerFailures: 1 << 20}
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, pool, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := keyring.Parse(keyring.Generate())
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := &env{t: t, pool: pool, keys: keys, store: catalog.NewStore(pool, keys, log), logs: logs, opts: o, stop: func() {}}
	if !o.noEngine {
		e.start()
	}
	t.Cleanup(func() { e.stop() })
	return e
}

// start runs an engine; stop stops it and waits for it.
func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	e.registry = reg
	engine, err := controller.New(controller.Config{Store: e.store, Kube: e.opts.kube, Logger: log,
		BrokerTimeout: e.opts.timeout, Workers: e.opts.workers, Registry: reg,
		RetryBase: e.opts.retryBase, RetryCap: e.opts.retryCap, MaxPollingDuration: e.opts.maxPolling,
		BrokerMaxInflight: e.opts.maxInflight, BreakerFailures: e.opts.breakerFailures, BreakerWait: e.opts.breakerWait,
		KubeTimeout: e.opts.kubeTimeout})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	e.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("engine: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Error("engine did not stop within 30s")
		}
		e.stop = func() {}
	}
}

// registerFake registers an osbtest broker in the catalog.
func (e *env) registerFake(opts ...osbtest.Option) *osbtest.Broker {
	e.t.Helper()
	fake := osbtest.New(e.t, append([]osbtest.Option{osbtest.WithBasicAuth("u", "p")}, opts...)...)
	e.register("fake", fake.URL(), "u", "p")
	return fake
}

// registerBindery runs Bindery's own broker and registers it.
func (e *env) registerBindery() {
	e.t.Helper()
	e.register("bindery", brokertest.Start(e.t, e.pool, e.keys, "osb", "osb-pass"), "osb", "osb-pass")
}

func (e *env) register(name, url, user, pass string) {
	e.t.Helper()
	ctx := context.Background()
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: url}}
	b.Name = name
	b, err := e.store.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: user, Password: pass}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Relist(ctx, b.ID); err != nil {
		e.t.Fatal(err)
	}
	e.broker = name
}

func (e *env) createInstance(name, class, plan string, params map[string]any, mutate ...func(*catalog.Instance)) *catalog.Instance {
	e.t.Helper()
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: class, ClusterServicePlanExternalName: plan}}
	in.Name, in.Namespace = name, "test"
	if params != nil {
		in.Spec.Parameters, _ = json.Marshal(params)
	}
	for _, m := range mutate {
		m(in)
	}
	in, err := e.store.CreateInstance(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

func (e *env) createBinding(name, instance string) *catalog.Binding {
	e.t.Helper()
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: instance}}}
	b.Name, b.Namespace = name, "test"
	b, err := e.store.CreateBinding(context.Background(), b)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// waitInstance waits until cond holds for the instance.
func (e *env) waitInstance(id string, what string, cond func(*catalog.Instance) bool) *catalog.Instance {
	e.t.Helper()
	var in *catalog.Instance
	err := eventually.Poll(e.t.Context(), 30*time.Second, func(ctx context.Context) error {
		var err error
		if in, err = e.store.GetInstance(ctx, id); err != nil {
			e.t.Fatal(err)
		}
		if !cond(in) {
			return errors.New("not yet")
		}
		return nil
	})
	if err == nil {
		return in
	}
	raw, _ := json.MarshalIndent(in.Status, "", "  ")
	e.t.Fatalf("instance %s never became %s; status:\n%s\nlog:\n%s", in.Name, what, raw, tail(e.logs.String()))
	return nil
}

func (e *env) waitBinding(id string, what string, cond func(*catalog.Binding) bool) *catalog.Binding {
	e.t.Helper()
	var b *catalog.Binding
	err := eventually.Poll(e.t.Context(), 30*time.Second, func(ctx context.Context) error {
		var err error
		if b, err = e.store.GetBinding(ctx, id); err != nil {
			e.t.Fatal(err)
		}
		if !cond(b) {
			return errors.New("not yet")
		}
		return nil
	})
	if err == nil {
		return b
	}
	raw, _ := json.MarshalIndent(b.Status, "", "  ")
	e.t.Fatalf("binding %s never became %s; status:\n%s\nlog:\n%s", b.Name, what, raw, tail(e.logs.String()))
	return nil
}

// waitGone waits until get reports the object gone.
func (e *env) waitGone(what string, get func() error) {
	e.t.Helper()
	err := eventually.Poll(e.t.Context(), 30*time.Second, func(context.Context) error {
		if err := get(); !errors.Is(err, catalog.ErrNotFound) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("%s was never removed; log:\n%s", what, tail(e.logs.String()))
	}
}

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}

func isReady(conds []catalog.Condition) bool {
	c, ok := catalog.FindCondition(conds, catalog.ConditionReady)
	return ok && c.Status == catalog.ConditionTrue
}

func condition(conds []catalog.Condition, typ string) catalog.Condition {
	c, _ := catalog.FindCondition(conds, typ)
	return c
}

func instanceReady(in *catalog.Instance) bool { return isReady(in.Status.Conditions) }
func bindingReady(b *catalog.Binding) bool    { return isReady(b.Status.Conditions) }

func failedFor(in *catalog.Instance) bool {
	return condition(in.Status.Conditions, catalog.ConditionFailed).Status == catalog.ConditionTrue
}

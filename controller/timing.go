package controller

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// Where the engine's time goes: each part counts the seconds the workers
// spend waiting on it (summed over the workers), so that a slow engine
// says whether the catalog, the brokers or the cluster hold it up. What a
// reconcile spends beyond these is the engine's own work.
type part int

const (
	// partClaim: claiming an object (its shard, when this engine does not
	// own it yet) in PostgreSQL.
	partClaim part = iota
	// partCatalog: the catalog's reads and writes.
	partCatalog
	// partBroker: OSB requests.
	partBroker
	// partKube: the cluster's Secrets.
	partKube
	// partFeed: the catalog reads that following the change feed makes
	// (which bindings an instance's change wakes up), outside the workers.
	partFeed
	parts
)

var partNames = [parts]string{"claim", "catalog", "broker", "kube", "feed"}

func newSpent(reg prometheus.Registerer) [parts]prometheus.Counter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bindery_controller_wait_seconds_total",
		Help: "Seconds the engine spent waiting on each part (claims, catalog, broker, kube; feed: reads made while following the change feed), summed over its workers.",
	}, []string{"part"})
	reg.MustRegister(vec)
	var out [parts]prometheus.Counter
	for p, name := range partNames {
		out[p] = vec.WithLabelValues(name)
	}
	return out
}

// since adds the time since start to part p.
func (c *Controller) since(p part, start time.Time) {
	c.metrics.spent[p].Add(time.Since(start).Seconds())
}

// brokerCall bounds an OSB request by the broker timeout; its done
// function takes the request's outcome, counts its time and its outcome
// for the broker's breaker, and returns the error to go on with. While
// the request is in flight the reconcile gives its worker back (run.go);
// once it is answered, its broker slot (bulkhead.go).
func (c *Controller) brokerCall(ctx context.Context, verb string) (context.Context, func(error) error) {
	start := time.Now()
	r := runOf(ctx)
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	if r != nil {
		r.inCall.Store(true)
		<-c.slots
	}
	return cctx, func(err error) error {
		cancel()
		c.since(partBroker, start)
		if r != nil {
			r.inCall.Store(false)
			c.gates.outcome(r, verb, err)
			// The broker's slot goes on before the reconcile waits
			// for a worker again.
			if r.keepSlot {
				r.keepSlot = false
			} else {
				c.gates.leave(r)
			}
			c.slots <- struct{}{}
		}
		if err != nil && errors.Is(context.Cause(ctx), errAbandoned) {
			return errAbandoned
		}
		return err
	}
}

// timedStore is the catalog as the engine's workers use it: each call's
// time counts to partCatalog.
type timedStore struct {
	*catalog.Store
	c *Controller
}

func (s timedStore) done(start time.Time) { s.c.since(partCatalog, start) }

// The class, plan and broker of a reconcile, through the store's cache of
// them, which the engine has forget a namespace's when the feed says one
// of them changed.

func (c *Controller) getClass(ctx context.Context, namespace, name string) (*catalog.ServiceClass, error) {
	defer c.store.done(time.Now())
	return c.store.CachedClassIn(ctx, namespace, name)
}

func (c *Controller) getPlan(ctx context.Context, namespace, name string) (*catalog.ServicePlan, error) {
	defer c.store.done(time.Now())
	return c.store.CachedPlanIn(ctx, namespace, name)
}

func (c *Controller) getBroker(ctx context.Context, namespace, name string) (*catalog.Broker, error) {
	defer c.store.done(time.Now())
	return c.store.CachedBrokerIn(ctx, namespace, name)
}

func (s timedStore) GetInstance(ctx context.Context, id string) (*catalog.Instance, error) {
	defer s.done(time.Now())
	return s.Store.GetInstance(ctx, id)
}

func (s timedStore) GetBinding(ctx context.Context, id string) (*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.GetBinding(ctx, id)
}

func (s timedStore) GetBindingLinked(ctx context.Context, id string) (*catalog.Binding, *catalog.Instance, error, error) {
	defer s.done(time.Now())
	return s.Store.GetBindingLinked(ctx, id)
}

func (s timedStore) GetBindingByName(ctx context.Context, namespace, name string) (*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.GetBindingByName(ctx, namespace, name)
}

func (s timedStore) BrokerClient(ctx context.Context, b *catalog.Broker) (*osb.Client, error) {
	defer s.done(time.Now())
	return s.Store.BrokerClient(ctx, b)
}

func (s timedStore) ResolveInstance(ctx context.Context, id string) (*catalog.Instance, error) {
	defer s.done(time.Now())
	return s.Store.ResolveInstance(ctx, id)
}

func (s timedStore) LinkBinding(ctx context.Context, id string) (*catalog.Instance, error) {
	defer s.done(time.Now())
	return s.Store.LinkBinding(ctx, id)
}

func (s timedStore) CheckBindable(ctx context.Context, b *catalog.Binding, in *catalog.Instance, class *catalog.ServiceClass, plan *catalog.ServicePlan) error {
	defer s.done(time.Now())
	return s.Store.CheckBindable(ctx, b, in, class, plan)
}

func (s timedStore) BindingsOf(ctx context.Context, instanceID string) ([]*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.BindingsOf(ctx, instanceID)
}

func (s timedStore) DeleteBinding(ctx context.Context, id string) (*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.DeleteBinding(ctx, id)
}

func (s timedStore) Credentials(ctx context.Context, bindingID string) (map[string]any, error) {
	defer s.done(time.Now())
	return s.Store.Credentials(ctx, bindingID)
}

func (s timedStore) UpdateInstanceStatus(ctx context.Context, id string, fn func(*catalog.Instance) error, events ...catalog.EventRecord) (*catalog.Instance, error) {
	defer s.done(time.Now())
	return s.Store.UpdateInstanceStatus(ctx, id, fn, events...)
}

func (s timedStore) UpdateBindingStatus(ctx context.Context, id string, fn func(*catalog.Binding) error, creds map[string]any, events ...catalog.EventRecord) (*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.UpdateBindingStatus(ctx, id, fn, creds, events...)
}

func (s timedStore) UpdateInstanceStatusFrom(ctx context.Context, in *catalog.Instance, fn func(*catalog.Instance) error, events ...catalog.EventRecord) (*catalog.Instance, error) {
	defer s.done(time.Now())
	return s.Store.UpdateInstanceStatusFrom(ctx, in, fn, events...)
}

func (s timedStore) UpdateBindingStatusFrom(ctx context.Context, b *catalog.Binding, fn func(*catalog.Binding) error, creds map[string]any, events ...catalog.EventRecord) (*catalog.Binding, error) {
	defer s.done(time.Now())
	return s.Store.UpdateBindingStatusFrom(ctx, b, fn, creds, events...)
}

func (s timedStore) FinalizeInstance(ctx context.Context, id string, e catalog.EventRecord) error {
	defer s.done(time.Now())
	return s.Store.FinalizeInstance(ctx, id, e)
}

func (s timedStore) FinalizeBinding(ctx context.Context, id string, e catalog.EventRecord) error {
	defer s.done(time.Now())
	return s.Store.FinalizeBinding(ctx, id, e)
}

// secretsIn are a namespace's Secrets as the engine uses them: each call's
// time counts to partKube.
func (c *Controller) secretsIn(namespace string) timedSecrets {
	return timedSecrets{c.kube.CoreV1().Secrets(namespace), c}
}

type timedSecrets struct {
	s typedcorev1.SecretInterface
	c *Controller
}

func (t timedSecrets) done(start time.Time) { t.c.since(partKube, start) }

// bounded is ctx bounded by the engine's Kubernetes timeout.
func (t timedSecrets) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.c.kubeTimeout)
}

func (t timedSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	defer t.done(time.Now())
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	return t.s.Get(ctx, name, opts)
}

func (t timedSecrets) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	defer t.done(time.Now())
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	return t.s.Create(ctx, s, opts)
}

func (t timedSecrets) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	defer t.done(time.Now())
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	return t.s.Update(ctx, s, opts)
}

func (t timedSecrets) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	defer t.done(time.Now())
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	return t.s.Delete(ctx, name, opts)
}

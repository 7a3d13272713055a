// Package controller is Bindery's engine. It reads the desired state of
// instances and bindings from the catalog, calls brokers through the OSB
// client to make it so, writes what happened back as status, and — when a
// cluster is configured — materialises bindings as Kubernetes Secrets.
//
// It is level-triggered: every reconcile starts from the object's spec and
// status as stored, never from the event that woke it. All its state lives
// in rows (the operation in progress and its token are in status), so a
// restarted engine carries on where the last one stopped; each object
// belongs to a shard one replica claims in PostgreSQL (claims.go), so
// several replicas never call a broker about the same object at once.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/catalog/resourcequota"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/osb"
)

// Config is what the engine needs.
type Config struct {
	// Store is the catalog. With a cluster (Kube), build it with that
	// cluster's Secrets (catalog.ReadSecretsWith(KubeSecrets{Kube})), for
	// brokers whose credentials are in Secrets.
	Store *catalog.Store
	// Kube is the cluster bindings are written to as Secrets; nil means no
	// cluster: a binding is Ready once its credentials are stored.
	Kube kubernetes.Interface
	// ClusterID identifies this platform to brokers (organization_guid and
	// context.clusterid).
	ClusterID string
	Logger    *slog.Logger
	Registry  prometheus.Registerer
	// NamespacedRegistry receives the series that name a namespace (those
	// of namespaced brokers), which not every scrape may read; nil:
	// Registry.
	NamespacedRegistry prometheus.Registerer
	// Workers is how many objects are reconciled at once (default 8).
	Workers int
	// Resync is how often every unsettled object is looked at again even
	// without a change (default 5 minutes).
	Resync time.Duration
	// BrokerTimeout bounds each broker request (default 60 s).
	BrokerTimeout time.Duration
	// RelistCheck, when positive, runs the catalog's relister in the
	// engine, looking that often for brokers whose catalogue is due to be
	// fetched: with a cluster, the engine is the one process that can read
	// brokers' credentials from Secrets.
	RelistCheck time.Duration
	// RetryBase is the wait after a broker call fails for the first time;
	// it doubles with each failure in a row, up to RetryCap (defaults
	// DefaultRetryBase and DefaultRetryCap: --retry-base, --retry-cap).
	RetryBase, RetryCap time.Duration
	// MaxPollingDuration is the longest an asynchronous operation is
	// polled before it is failed, unless its plan's
	// maximum_polling_duration is shorter (default
	// DefaultMaxPollingDuration: --max-polling-duration).
	MaxPollingDuration time.Duration
	// BrokerMaxInflight bounds the requests in flight to each broker from
	// this process (default DefaultBrokerMaxInflight:
	// --broker-max-inflight).
	BrokerMaxInflight int
	// BreakerFailures is how many requests to a broker in a row may fail
	// or time out before its circuit breaker opens (default
	// DefaultBreakerFailures: --broker-breaker-failures); BreakerWait the
	// wait before its first probe (default DefaultBreakerWait:
	// --broker-breaker-wait).
	BreakerFailures int
	BreakerWait     time.Duration
	// KubeTimeout bounds each request of the engine's own to
	// kube-apiserver (Secrets read and written; default
	// kubecall.DefaultTimeout: --kube-request-timeout): reconciles have no
	// deadline of their own, and a request that a lost connection or a
	// stuck kube-apiserver never answers would hold its object for good.
	KubeTimeout time.Duration
}

// Controller is the engine.
type Controller struct {
	store     timedStore
	kube      kubernetes.Interface
	clusterID string
	log       *slog.Logger
	workers   int
	resync    time.Duration
	timeout   time.Duration
	relist    time.Duration
	queue     workqueue.TypedRateLimitingInterface[objectKey]
	// turns is the queue's storage: objects handed a broker slot first.
	turns   *turns
	metrics *metrics
	backoff backoff
	maxPoll time.Duration
	claims  *catalog.Claimer
	// refused are keys whose shard another replica owned (claims.go).
	refused refusedKeys
	wake    *wakeups
	gates   *gates
	runs    runs
	// refetches are the catalogue fetches after MaintenanceInfoConflict,
	// one per broker at a time.
	refetches singleflight.Group
	// slots are the workers: a reconcile holds one, except while it waits
	// on a broker (run.go).
	slots chan struct{}
	// kubeTimeout is Config.KubeTimeout.
	kubeTimeout time.Duration

	mu      sync.Mutex
	clients map[string]cachedClient
	// polls are, per object id, its asynchronous operation's polls
	// (polls.go).
	polls sync.Map
	// secrets is the cache of the Secrets the engine wrote (nil without
	// a cluster), filled by the informer that repairs them.
	secrets corelisters.SecretLister
	// now is the clock, replaceable in tests.
	now func() time.Time
}

type cachedClient struct {
	version int64
	client  *osb.Client
	// expires, when set, is when the client's credentials are read again.
	expires time.Time
}

// New returns an engine; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil {
		return nil, errors.New("controller: a catalog store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.BrokerTimeout <= 0 {
		cfg.BrokerTimeout = 60 * time.Second
	}
	if cfg.KubeTimeout <= 0 {
		cfg.KubeTimeout = kubecall.DefaultTimeout
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "bindery"
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryCap <= 0 {
		cfg.RetryCap = DefaultRetryCap
	}
	if cfg.RetryCap < cfg.RetryBase {
		return nil, fmt.Errorf("controller: the retry cap (%s) is shorter than the retry base (%s)", cfg.RetryCap, cfg.RetryBase)
	}
	if cfg.MaxPollingDuration <= 0 {
		cfg.MaxPollingDuration = DefaultMaxPollingDuration
	}
	if cfg.BrokerMaxInflight <= 0 {
		cfg.BrokerMaxInflight = DefaultBrokerMaxInflight
	}
	if cfg.BreakerFailures <= 0 {
		cfg.BreakerFailures = DefaultBreakerFailures
	}
	if cfg.BreakerWait <= 0 {
		cfg.BreakerWait = DefaultBreakerWait
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[objectKey](200*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[objectKey]{Limiter: newBucket()},
	)
	turns := newTurns()
	c := &Controller{
		kube:      cfg.Kube,
		clusterID: cfg.ClusterID,
		log:       cfg.Logger,
		workers:   cfg.Workers,
		resync:    cfg.Resync,
		timeout:   cfg.BrokerTimeout,
		relist:    cfg.RelistCheck,
		queue:     turns.queue(limiter),
		turns:     turns,
		metrics:   newMetrics(cfg.Registry),
		backoff:   newBackoff(cfg.RetryBase, cfg.RetryCap),
		maxPoll:   cfg.MaxPollingDuration,
		clients:   map[string]cachedClient{},
		wake:      newWakeups(),
		runs:      runs{m: map[objectKey]*run{}},
		slots:     make(chan struct{}, cfg.Workers),
		now:       time.Now,
	}
	c.store = timedStore{Store: cfg.Store, c: c}
	c.kubeTimeout = cfg.KubeTimeout
	c.gates = newGates(c, cfg.Registry, cfg.NamespacedRegistry, cfg.BrokerMaxInflight, cfg.BreakerFailures, cfg.BreakerWait)
	return c, nil
}

// Run reconciles until ctx ends: first everything unsettled, then whatever
// the change feed announces, and everything unsettled again every resync
// period. Running work is finished before Run returns.
func (c *Controller) Run(ctx context.Context) error {
	rev, err := c.store.Revision(ctx)
	if err != nil {
		return fmt.Errorf("read the catalog revision: %w", err)
	}
	// Claims hold shards of the objects on a session of their own (the
	// feed listens on one of its own); the first probe looks for engines
	// of an earlier release before any object is worked on.
	if c.claims, err = c.store.NewClaimer(ctx); err != nil {
		return fmt.Errorf("open the claims' session: %w", err)
	}
	defer c.claims.Close()
	if _, err := c.claims.Probe(ctx); err != nil {
		return fmt.Errorf("probe the claims: %w", err)
	}
	if err := c.enqueueUnsettled(ctx); err != nil {
		return err
	}
	var syncSecrets func() error
	if c.kube != nil {
		if syncSecrets, err = c.watchSecrets(ctx); err != nil {
			return err
		}
	}
	c.gates.ctx = ctx
	var wg sync.WaitGroup
	wg.Go(func() { c.dispatch(ctx, &wg) })
	relistCtx, stopRelist := context.WithCancel(ctx)
	defer stopRelist()
	wg.Go(func() { c.probeClaims(relistCtx) })
	if syncSecrets != nil {
		if err := syncSecrets(); err != nil {
			return err
		}
	}
	if c.relist > 0 {
		wg.Go(func() { c.store.RunRelister(relistCtx, c.relist) })
	}
	if c.kube != nil {
		// The cluster's ResourceQuotas on instances and bindings, copied
		// for the catalog's quota checks.
		wg.Go(func() {
			if err := resourcequota.Run(relistCtx, c.kube, c.store.Store, c.log); err != nil && relistCtx.Err() == nil {
				c.log.Error("copy the cluster's ResourceQuotas", "error", err)
			}
		})
	}
	c.log.Info("engine started", "workers", c.workers, "cluster", c.kube != nil)
	c.watch(ctx, rev)
	stopRelist()
	c.queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

func (c *Controller) enqueueUnsettled(ctx context.Context) error {
	instances, bindings, err := c.store.Unsettled(ctx)
	if err != nil {
		return fmt.Errorf("list unsettled objects: %w", err)
	}
	for _, k := range instances {
		c.queue.Add(instanceKey(k.Namespace, k.ID))
	}
	for _, k := range bindings {
		c.queue.Add(bindingKey(k.Namespace, k.ID))
	}
	return nil
}

// watch follows the change feed after rev, enqueueing what each change
// touches, and everything unsettled again every resync period. Changes to
// the catalogue (classes and plans a relist added or changed) wake the
// instances that wait for theirs.
func (c *Controller) watch(ctx context.Context, rev int64) {
	c.store.Feed().Follow(ctx, rev, catalog.FollowOptions{
		Kinds: []string{catalog.KindInstance, catalog.KindBinding, catalog.KindServiceClass, catalog.KindServicePlan,
			catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan, catalog.KindBroker, catalog.KindNamespacedBroker},
		NamesOnly: true, // each object is read when reconciled
		Idle:      c.resync,
		OnIdle:    c.enqueueUnsettled,
	}, func(ctx context.Context, page []catalog.Change) error {
		catalogue := false
		// The instances changed in the page, whose bindings may wait for
		// them: looked up once for the whole page.
		var ids, namespaces, names []string
		for _, ch := range page {
			switch ch.Kind {
			case catalog.KindBroker, catalog.KindNamespacedBroker:
				// Its namespace's alone (the cluster's is ""): no other
				// namespace's reads go through it.
				c.store.ForgetCached(ch.Object.Namespace)
				if ch.Type == catalog.Deleted {
					c.brokerDeleted(ch.Object.ID)
				}
				continue
			case catalog.KindServiceClass, catalog.KindServicePlan, catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan:
				// Before the changes after it are handed to the workers.
				c.store.ForgetCached(ch.Object.Namespace)
				catalogue = catalogue || ch.Type != catalog.Deleted
				continue
			}
			if ch.Kind == catalog.KindInstance {
				ids, namespaces, names = append(ids, ch.Object.ID), append(namespaces, ch.Object.Namespace), append(names, ch.Object.Name)
			}
			c.enqueueChange(ctx, ch)
		}
		if len(ids) > 0 {
			start := time.Now()
			bindings, err := c.store.BindingsToWake(ctx, ids, namespaces, names)
			c.since(partFeed, start)
			if err != nil {
				return fmt.Errorf("list the bindings of changed instances: %w", err)
			}
			for _, k := range bindings {
				c.queue.Add(bindingKey(k.Namespace, k.ID))
			}
		}
		if catalogue {
			// One look per page, however large the relist.
			if err := c.enqueueUnresolved(ctx); err != nil {
				return err
			}
		}
		c.metrics.feed.Set(float64(page[len(page)-1].Revision))
		return nil
	})
}

// enqueueUnresolved enqueues the instances whose class and plan are not
// resolved yet.
func (c *Controller) enqueueUnresolved(ctx context.Context) error {
	keys, err := c.store.UnresolvedInstances(ctx)
	if err != nil {
		return fmt.Errorf("list instances waiting for their plan: %w", err)
	}
	for _, k := range keys {
		c.queue.Add(instanceKey(k.Namespace, k.ID))
	}
	return nil
}

// interrupt looks at an object whose reconcile waits on its broker when
// someone else changed it: if it was abandoned, the call is cancelled.
func (c *Controller) interrupt(ctx context.Context, key objectKey, ch catalog.Change) {
	if ch.Type == catalog.Deleted {
		return
	}
	if r := c.runs.waiting(key, ch.Revision); r != nil {
		go c.checkAbandoned(ctx, r)
	}
}

// enqueueChange enqueues the object a change is about, and an instance
// that waits for a removed binding. The bindings an instance's change may
// concern are the page's to look up (watch).
func (c *Controller) enqueueChange(ctx context.Context, ch catalog.Change) {
	ns, id := ch.Object.Namespace, ch.Object.ID
	if ch.Type == catalog.Deleted {
		// A removed object writes no status that would drop its poll
		// state (writeInstance, writeBinding), and makes no request that
		// would take it out of its broker's failing objects.
		c.forgetPolls(id)
	}
	switch ch.Kind {
	case catalog.KindInstance:
		key := instanceKey(ns, id)
		if ch.Type == catalog.Deleted {
			c.gates.forgetObject(key)
		}
		c.interrupt(ctx, key, ch)
		if ch.Type != catalog.Deleted && c.wake.announce(key, ch.Revision) {
			c.queue.Add(key)
		}
	case catalog.KindBinding:
		key := bindingKey(ns, id)
		if ch.Type == catalog.Deleted {
			c.gates.forgetObject(key)
		}
		c.interrupt(ctx, key, ch)
		if ch.Type != catalog.Deleted && c.wake.announce(key, ch.Revision) {
			c.queue.Add(key)
		}
		// An instance being deleted waits for its bindings to go: their
		// removal is what it waits for, and nothing else of theirs
		// concerns it.
		if ch.InstanceID != "" && ch.Type == catalog.Deleted {
			c.queue.Add(instanceKey(ns, ch.InstanceID))
		}
	}
}

// dispatch hands each key of the queue to a reconcile of its own once a
// worker is free, until the queue shuts down. It takes the key first and
// the worker then: a worker taken while the queue is empty would stand
// idle, and a reconcile whose broker answered, waiting for a worker again
// (brokerCall), would wait for the next key to come, with one worker for
// ever.
func (c *Controller) dispatch(ctx context.Context, wg *sync.WaitGroup) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		c.slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-c.slots }()
			c.process(ctx, key)
		})
	}
}

// process reconciles one object from the queue: Done is deferred, Forget
// on success, AddRateLimited on an error of the engine's own (the database
// away); a broker's failures come back as a wait, held in the object's
// status with its backoff; permanent failures are in status and not
// retried until the spec changes.
func (c *Controller) process(ctx context.Context, key objectKey) {
	c.wake.start(key)
	defer func() {
		if c.wake.finish(key) {
			c.queue.Add(key) // after this reconcile
		}
		c.queue.Done(key)
	}()
	started := time.Now()
	release, ok, err := c.claims.Claim(ctx, key.String())
	c.since(partClaim, started)
	if err != nil || !ok {
		c.gates.finish(&run{key: key}, started)
		if err != nil {
			// The database is away: later.
			c.queue.AddAfter(key, time.Second)
		} else {
			// Another replica owns its shard and works on it.
			c.refused.add(key)
		}
		return
	}
	rctx, cancel := context.WithCancelCause(ctx)
	r := &run{key: key, cancel: cancel, bypass: c.gates.lifted(key), log: c.log.With("key", key.String())}
	c.runs.add(r)
	res, err := c.reconcile(context.WithValue(rctx, runKey{}, r), key)
	c.runs.remove(r)
	c.gates.finish(r, started)
	abandoned := errors.Is(context.Cause(rctx), errAbandoned)
	cancel(nil)
	released := time.Now()
	release()
	c.since(partClaim, released)
	kind := key.kind.String()
	c.metrics.reconciles.WithLabelValues(kind, outcome(err)).Inc()
	c.metrics.duration.WithLabelValues(kind).Observe(time.Since(started).Seconds())
	switch {
	case abandoned:
		// Removed on the next reconcile, at once.
		c.queue.Forget(key)
		c.queue.Add(key)
	case err != nil:
		if ctx.Err() == nil {
			r.log.Warn("reconcile failed; will retry", "error", err)
		}
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
		if res.requeueAfter > 0 {
			c.queue.AddAfter(key, res.requeueAfter)
		}
	}
}

// reconcile reconciles the object key names.
func (c *Controller) reconcile(ctx context.Context, key objectKey) (result, error) {
	switch key.kind {
	case instanceKeyKind:
		return c.reconcileInstance(ctx, key)
	case bindingKeyKind:
		return c.reconcileBinding(ctx, key)
	}
	return result{}, nil
}

// outcome is the metrics label of a reconcile that ended with err.
func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// secretCredentialsTTL is how long the engine uses credentials read from a
// broker's Secret before reading it again.
const secretCredentialsTTL = 30 * time.Second

// KubeSecrets reads Secrets from a cluster for the catalog
// (catalog.ReadSecretsWith): the credentials of brokers registered
// through the Kubernetes API. Timeout bounds each read
// (kubecall.DefaultTimeout when 0).
type KubeSecrets struct {
	Kube    kubernetes.Interface
	Timeout time.Duration
}

// SecretData returns the Secret's data.
func (k KubeSecrets) SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(k.Timeout, kubecall.DefaultTimeout))
	defer cancel()
	s, err := k.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data, nil
}

// brokerDeleted forgets what the engine keeps of a deleted broker: its
// gate (bulkhead.go) and its cached client, whose idle connections are
// closed.
func (c *Controller) brokerDeleted(id string) {
	c.gates.forget(id)
	c.mu.Lock()
	cached, ok := c.clients[id]
	delete(c.clients, id)
	c.mu.Unlock()
	if ok {
		cached.client.CloseIdleConnections()
	}
}

// client returns the OSB client of a broker, cached per broker version
// (and for a while only, when its credentials are in a Secret).
func (c *Controller) client(ctx context.Context, namespace, brokerName string) (*catalog.Broker, *osb.Client, error) {
	b, err := c.getBroker(ctx, namespace, brokerName)
	if err != nil {
		return nil, nil, fmt.Errorf("broker %s: %w", brokerName, err)
	}
	c.mu.Lock()
	cached, ok := c.clients[b.ID]
	c.mu.Unlock()
	if ok && cached.version == b.Generation && (cached.expires.IsZero() || c.now().Before(cached.expires)) {
		return b, cached.client, nil
	}
	cl, err := c.store.BrokerClient(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	cached = cachedClient{version: b.Generation, client: cl}
	if b.Spec.SecretRef() != nil {
		// The Secret can change without the broker: read it again soon.
		cached.expires = c.now().Add(secretCredentialsTTL)
	}
	c.mu.Lock()
	c.clients[b.ID] = cached
	c.mu.Unlock()
	return b, cl, nil
}

func ready(conds []catalog.Condition) bool {
	cond, ok := catalog.FindCondition(conds, catalog.ConditionReady)
	return ok && cond.Status == catalog.ConditionTrue
}

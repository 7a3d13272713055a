package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/serve"
)

// Options are the engine's command-line settings. The database and the
// encryption keys belong to the command, which hands Config the store.
type Options struct {
	// Listen is HOST:PORT for the engine's health and metrics.
	Listen string
	// listenFlag is the flag that set Listen ("" when no flag did),
	// which Validate names.
	listenFlag string
	// Kubeconfig is the cluster bindings are written to as Secrets.
	Kubeconfig    string
	ClusterID     string
	Workers       int
	Resync        time.Duration
	BrokerTimeout time.Duration
	// RelistCheck is how often the engine relists brokers; 0: never.
	RelistCheck time.Duration
	// BrokerMaxInflight, BreakerFailures and BreakerWait are the
	// bulkheads' flags (bulkhead.go).
	BrokerMaxInflight int
	BreakerFailures   int
	BreakerWait       time.Duration
	// KubeTimeout bounds each request of the engine's own to the cluster
	// (Config.KubeTimeout).
	KubeTimeout time.Duration
	// Retry holds the backoff and polling flags (RetryBase, RetryCap,
	// MaxPollingDuration), which Config.AddFlags registers.
	Retry Config
}

// AddFlags registers the engine's flags; listenFlag names the listen
// address's flag (it differs when several components share a command).
// --relist-check-interval is left to a component that registered it
// first: in `bindery up` the catalog server relists and the engine does
// not.
func (o *Options) AddFlags(fs *flag.FlagSet, listenFlag, listenDefault string) {
	fs.StringVar(&o.Listen, listenFlag, listenDefault, "HOST:PORT for the engine's health and metrics")
	o.listenFlag = "--" + listenFlag
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster bindings are written to as Secrets (also KUBECONFIG; in a Pod the in-cluster configuration is used); none: no cluster")
	fs.StringVar(&o.ClusterID, "cluster-id", "bindery", "identifies this platform to brokers (organization_guid, context.clusterid)")
	fs.IntVar(&o.Workers, "controller-workers", 8, "objects reconciled at once")
	fs.DurationVar(&o.Resync, "resync", 5*time.Minute, "how often every unsettled object is looked at again")
	fs.DurationVar(&o.BrokerTimeout, "broker-request-timeout", 60*time.Second, "timeout of each OSB request the engine makes (catalogue fetches use --broker-timeout)")
	fs.IntVar(&o.BrokerMaxInflight, "broker-max-inflight", DefaultBrokerMaxInflight,
		"requests in flight to each broker from this engine process (provisions, binds, polls, orphan mitigation; replicas have one each): objects beyond wait in line, holding no worker")
	fs.IntVar(&o.BreakerFailures, "broker-breaker-failures", DefaultBreakerFailures,
		"requests to a broker in a row that may fail (5xx, 429, malformed) or time out before its circuit breaker opens and its requests are held back")
	fs.DurationVar(&o.BreakerWait, "broker-breaker-wait", DefaultBreakerWait,
		"wait before an open breaker's first probe (GET /v2/catalog); it doubles with each failed probe, up to 5m")
	fs.DurationVar(&o.KubeTimeout, kubecall.Flag, kubecall.DefaultTimeout,
		"timeout of each request the engine makes to kube-apiserver (Secrets of bindings and brokers' credentials, Events); the informer's list and watch are not bounded")
	o.Retry.AddFlags(fs)
	// On its own the engine runs a relister (several replicas share the
	// work through claims), the only one that can read brokers'
	// credentials from Secrets.
	if fs.Lookup("relist-check-interval") == nil {
		fs.DurationVar(&o.RelistCheck, "relist-check-interval", time.Second, "how often to look for brokers whose relist is due; 0: never")
	}
}

// Validate reports every problem with the options together.
func (o *Options) Validate() error {
	var errs []error
	if o.listenFlag != "" {
		errs = append(errs, serve.CheckListen(o.listenFlag, o.Listen))
	}
	if o.Workers <= 0 {
		errs = append(errs, errors.New("--controller-workers: must be positive"))
	}
	if err := validClusterID(o.ClusterID); err != nil {
		errs = append(errs, err)
	}
	if o.Resync <= 0 {
		errs = append(errs, errors.New("--resync: must be positive"))
	}
	if o.BrokerTimeout <= 0 {
		errs = append(errs, errors.New("--broker-request-timeout: must be positive"))
	}
	if o.RelistCheck < 0 {
		errs = append(errs, errors.New("--relist-check-interval: must not be negative"))
	}
	if o.BrokerMaxInflight <= 0 {
		errs = append(errs, errors.New("--broker-max-inflight: must be positive"))
	}
	if o.BreakerFailures <= 0 {
		errs = append(errs, errors.New("--broker-breaker-failures: must be positive"))
	}
	if o.BreakerWait <= 0 {
		errs = append(errs, errors.New("--broker-breaker-wait: must be positive"))
	}
	if err := kubecall.Validate(o.KubeTimeout); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Retry.ValidateFlags()...)
	return errors.Join(errs...)
}

// validClusterID refuses a --cluster-id that brokers cannot be sent: OSB
// requires organization_guid to be a non-empty string, and an empty one
// would otherwise quietly become Config's default.
func validClusterID(id string) error {
	switch {
	case id == "":
		return errors.New("--cluster-id: must not be empty")
	case len(id) > 255 || !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0:
		return errors.New("--cluster-id: must be at most 255 bytes of UTF-8 text without control characters")
	}
	return nil
}

// RESTConfig is the configured cluster, or nil: --kubeconfig or
// KUBECONFIG, else in-cluster when running in a Pod; never an implicit
// ~/.kube/config.
func (o *Options) RESTConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case o.Kubeconfig != "":
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster configuration: %w", err)
	}
	return cfg, nil
}

// KubeClient is a client of the configured cluster (RESTConfig), or nil.
func (o *Options) KubeClient() (kubernetes.Interface, error) {
	cfg, err := o.RESTConfig()
	if err != nil || cfg == nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// Cluster is the engine's cluster, connected to the store: brokers
// registered through the Kubernetes API keep their credentials in its
// Secrets, and the store's history goes to it as Events too.
type Cluster struct {
	Kube   kubernetes.Interface
	events *Events
	// timeout bounds each read of a broker's Secret.
	timeout time.Duration
}

// ConnectCluster returns the cluster of o, or nil when none is configured.
// Build the store with its StoreOptions, and run the cluster (Run) until the
// store is no longer used.
func (o *Options) ConnectCluster(ctx context.Context) (*Cluster, error) {
	kube, err := o.KubeClient()
	if err != nil || kube == nil {
		return nil, err
	}
	c := &Cluster{Kube: kube, events: NewEvents(kube, o.KubeTimeout), timeout: o.KubeTimeout}
	if err := c.events.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("start recording Kubernetes Events: %w", err)
	}
	return c, nil
}

// StoreOptions connect a store to the cluster: brokers registered through
// the Kubernetes API keep their credentials in its Secrets, and the store's
// history goes to it as Events too. A nil Cluster gives none.
func (c *Cluster) StoreOptions() []catalog.Option {
	if c == nil {
		return nil
	}
	return []catalog.Option{catalog.ReadSecretsWith(KubeSecrets{Kube: c.Kube, Timeout: c.timeout}), catalog.PublishEventsTo(c.events.Publish)}
}

// Run sends Events until ctx ends, then stops the broadcaster. A nil
// Cluster returns at once.
func (c *Cluster) Run(ctx context.Context) error {
	if c == nil {
		return nil
	}
	<-ctx.Done()
	c.events.broadcaster.Shutdown()
	return nil
}

// Config returns the engine's Config over store; cluster is the one from
// ConnectCluster, or nil.
func (o *Options) Config(store *catalog.Store, cluster *Cluster, log *slog.Logger) Config {
	cfg := Config{
		Store: store, ClusterID: o.ClusterID, Logger: log,
		Workers: o.Workers, Resync: o.Resync, BrokerTimeout: o.BrokerTimeout, RelistCheck: o.RelistCheck,
		RetryBase: o.Retry.RetryBase, RetryCap: o.Retry.RetryCap, MaxPollingDuration: o.Retry.MaxPollingDuration,
		BrokerMaxInflight: o.BrokerMaxInflight, BreakerFailures: o.BreakerFailures, BreakerWait: o.BreakerWait,
		KubeTimeout: o.KubeTimeout,
	}
	if cluster != nil {
		cfg.Kube = cluster.Kube
	}
	return cfg
}

// Run runs the engine, with its health and metrics served on l, until ctx
// ends; it returns once both have stopped. The engine's metrics are
// registered on registries of its own, which l's /metrics serves: those
// of namespaced brokers, which name their namespace, only to a scrape
// with a catalog token for all namespaces (serve.SplitMetrics).
func Run(ctx context.Context, cfg Config, l net.Listener) error {
	reg, namespaced := serve.NewRegistry(), prometheus.NewRegistry()
	cfg.Registry, cfg.NamespacedRegistry = reg, namespaced
	engine, err := New(cfg)
	if err != nil {
		_ = l.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return engine.Run(gctx) })
	// Whichever processes own the catalog prune its change feed; a claim in
	// PostgreSQL makes one of them do each round.
	g.Go(func() error {
		cfg.Store.Feed().RunPruner(gctx, catalog.Retention{})
		return nil
	})
	g.Go(func() error {
		e := serve.NewEcho(engine.log, nil, func(ctx context.Context) error { return cfg.Store.Ping(ctx) })
		e.GET("/metrics", echo.WrapHandler(serve.SplitMetrics(reg, namespaced, cfg.Store.NewTokenCache(0).ForAllNamespaces)))
		engine.log.Info("serving health and metrics", "addr", l.Addr().String())
		return serve.Run(gctx, l, e, engine.log)
	})
	return g.Wait()
}

// AddFlags registers the engine's backoff and polling flags, with their
// defaults, to fill c: --retry-base, --retry-cap, --max-polling-duration.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.RetryBase, "retry-base", DefaultRetryBase, "wait after a broker call fails for the first time; it doubles with each failure in a row (with jitter), up to --retry-cap")
	fs.DurationVar(&c.RetryCap, "retry-cap", DefaultRetryCap, "longest wait between attempts of a failing broker call")
	fs.DurationVar(&c.MaxPollingDuration, "max-polling-duration", DefaultMaxPollingDuration, "longest an asynchronous operation is polled before it is failed (a plan's shorter maximum_polling_duration wins)")
}

// ValidateFlags returns every problem with the values AddFlags fills, at
// once.
func (c *Config) ValidateFlags() []error {
	var errs []error
	if c.RetryBase <= 0 {
		errs = append(errs, errors.New("--retry-base: must be positive"))
	}
	if c.RetryCap < c.RetryBase {
		errs = append(errs, fmt.Errorf("--retry-cap: must be at least --retry-base (%s)", c.RetryBase))
	}
	if c.MaxPollingDuration <= 0 {
		errs = append(errs, errors.New("--max-polling-duration: must be positive"))
	}
	return errs
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
)

// controllerOptions are the flags of the engine.
type controllerOptions struct {
	listen        string
	encryptionKey string
	kubeconfig    string
	clusterID     string
	workers       int
	resync        time.Duration
	brokerTimeout time.Duration
	relistCheck   time.Duration
	engine        controller.Config // the engine's own flags (backoff, polling)
}

func (o *controllerOptions) addFlags(fs *flag.FlagSet, listenFlag, listen string) {
	fs.StringVar(&o.listen, listenFlag, listen, "HOST:PORT for the engine's health and metrics")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster bindings are written to as Secrets (also KUBECONFIG; in a Pod the in-cluster configuration is used); none: no cluster")
	fs.StringVar(&o.clusterID, "cluster-id", "bindery", "identifies this platform to brokers (organization_guid, context.clusterid)")
	fs.IntVar(&o.workers, "controller-workers", 8, "objects reconciled at once")
	fs.DurationVar(&o.resync, "resync", 5*time.Minute, "how often every unsettled object is looked at again")
	fs.DurationVar(&o.brokerTimeout, "broker-timeout", 60*time.Second, "timeout of each broker request")
	o.engine.AddFlags(fs)
	if fs.Lookup("encryption-key") == nil {
		fs.StringVar(&o.encryptionKey, "encryption-key", "", "comma-separated base64 32-byte keys sealing secrets at rest; the first encrypts")
	}
	// In `bindery up` the catalog's relister runs; on its own the engine
	// runs one too (several replicas share the work through claims), the
	// only one that can read brokers' credentials from Secrets.
	if fs.Lookup("relist-check-interval") == nil {
		fs.DurationVar(&o.relistCheck, "relist-check-interval", time.Second, "how often to look for brokers whose relist is due; 0: never")
	}
}

func (o *controllerOptions) validate() []error {
	var errs []error
	if _, err := keyring.Parse(o.encryptionKey); err != nil {
		errs = append(errs, err)
	}
	if o.workers <= 0 {
		errs = append(errs, errors.New("--controller-workers: must be positive"))
	}
	if o.relistCheck < 0 {
		errs = append(errs, errors.New("--relist-check-interval: must not be negative"))
	}
	errs = append(errs, o.engine.ValidateFlags()...)
	return errs
}

// kubeClient is the configured cluster, or nil: --kubeconfig or
// KUBECONFIG, else in-cluster when running in a Pod; never an implicit
// ~/.kube/config.
func (o *controllerOptions) kubeClient() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	switch {
	case o.kubeconfig != "":
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

func runServeController(ctx context.Context, e env, args []string) error {
	var o controllerOptions
	log, pool, err := startServer(ctx, e, "serve controller", args,
		func(fs *flag.FlagSet) { o.addFlags(fs, "listen", ":8082") },
		func(*dbOptions) []error { return o.validate() }, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	// client-go (its informers, the Events recorder) logs through klog:
	// send it to the same handler.
	klog.SetSlogLogger(log.With("component", "controller"))
	store, err := newCatalogStore(pool, o.encryptionKey, log)
	if err != nil {
		return err
	}
	l, err := serve.Listen(o.listen)
	if err != nil {
		return err
	}
	kube, err := withCluster(ctx, store, &o)
	if err != nil {
		return err
	}
	return runController(ctx, log, store, kube, &o, l)
}

// withCluster returns the engine's cluster, if one is configured, and
// connects the store to it: brokers registered through the Kubernetes API
// keep their credentials in its Secrets, and the store's history goes to
// it as Events too. Call it before anything uses the store.
func withCluster(ctx context.Context, store *catalog.Store, o *controllerOptions) (kubernetes.Interface, error) {
	kube, err := o.kubeClient()
	if err != nil || kube == nil {
		return nil, err
	}
	store.ReadSecretsWith(controller.KubeSecrets{Kube: kube})
	events := controller.NewEvents(kube)
	if err := events.Start(ctx); err != nil {
		return nil, err
	}
	store.PublishEventsTo(events.Publish)
	return kube, nil
}

// runController runs the engine, with its health and metrics on l; kube is
// the cluster from withCluster, or nil.
func runController(ctx context.Context, log *slog.Logger, store *catalog.Store, kube kubernetes.Interface, o *controllerOptions, l net.Listener) error {
	log = log.With("component", "controller")
	reg := serve.NewRegistry()
	engine, err := controller.New(controller.Config{
		Store: store, Kube: kube, ClusterID: o.clusterID, Logger: log, Registry: reg,
		Workers: o.workers, Resync: o.resync, BrokerTimeout: o.brokerTimeout, RelistCheck: o.relistCheck,
		RetryBase: o.engine.RetryBase, RetryCap: o.engine.RetryCap, MaxPollingDuration: o.engine.MaxPollingDuration,
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return engine.Run(gctx) })
	g.Go(func() error {
		e := serve.NewEcho(log, reg, func(ctx context.Context) error { return store.Pool().Ping(ctx) })
		return serve.Run(gctx, l, e, log)
	})
	return g.Wait()
}

package servicebinding

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	sbv1beta1 "github.com/bindery-dev/bindery/apis/servicebinding/v1beta1"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/serve"
)

// MutatePath is the URL path of the mutating webhook; the webhook
// configurations in deploy/servicebinding point at it.
const MutatePath = "/mutate"

// Options are the flags of `bindery serve webhook`.
type Options struct {
	// Listen is HOST:PORT of the TLS server: the webhook, /healthz,
	// /readyz and /metrics.
	Listen string
	// CertDir holds tls.crt and tls.key, reloaded when they change
	// (cert-manager rotates them in place).
	CertDir string
	// Kubeconfig is the cluster to work on; in-cluster configuration when empty.
	Kubeconfig string
	// Controller runs the reconciler beside the webhook.
	Controller bool
	// Listener, when set, is where the webhook is served instead of
	// Listen: `bindery up` opens it with its other listeners, before it
	// writes anything to the cluster.
	Listener net.Listener
	// KubeTimeout bounds each request to kube-apiserver other than the
	// informers' lists and watches (--kube-request-timeout, which Validate
	// wants positive; RunWithConfig and InstallLocal take 0 for
	// kubecall.DefaultTimeout): reconciles have no deadline of their own,
	// and the RESTMapper's discovery none at all, so a request a lost
	// connection never answers would hold a worker, or every caller of the
	// mapper, for good.
	KubeTimeout time.Duration

	host string
	port int
}

// AddFlags adds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":9443", "HOST:PORT to serve the webhook (TLS), health and metrics on")
	fs.StringVar(&o.CertDir, "cert-dir", "", "`directory` holding tls.crt and tls.key of the webhook's serving certificate")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig `file` of the cluster; in-cluster configuration when empty")
	fs.BoolVar(&o.Controller, "controller", true, "also run the controller that projects ServiceBindings into existing workloads")
	fs.DurationVar(&o.KubeTimeout, kubecall.Flag, kubecall.DefaultTimeout,
		"timeout of each request the webhook and the controller make to kube-apiserver (reads the cache cannot answer, writes, discovery, Events); the informers' lists and watches are not bounded")
}

// Complete fills in what follows from the flags.
func (o *Options) Complete() error {
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil // Validate reports it
	}
	o.host = host
	o.port, _ = strconv.Atoi(port)
	return nil
}

// ValidateListen reports a listen address the server cannot use, naming
// flag, the flag that set it. Port 0 picks a free port.
func (o *Options) ValidateListen(flag string) error {
	return serve.CheckListen(flag, o.Listen)
}

// Port is the port the webhook is served on: Listener's when set (the
// one bound when Listen asked for port 0), else Listen's.
func (o *Options) Port() int {
	if o.Listener != nil {
		if a, ok := o.Listener.Addr().(*net.TCPAddr); ok {
			return a.Port
		}
	}
	return o.port
}

// Validate returns every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.ValidateListen("--listen"); err != nil {
		errs = append(errs, err)
	}
	if err := kubecall.Validate(o.KubeTimeout); err != nil {
		errs = append(errs, err)
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir is required: the API server calls webhooks over TLS only"))
	} else {
		for _, f := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Stat(filepath.Join(o.CertDir, f)); err != nil {
				errs = append(errs, fmt.Errorf("--cert-dir: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Scheme returns the types the webhook and the controller read and write.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, sbv1.AddToScheme, sbv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// RESTConfig returns the cluster configuration the options name.
func (o *Options) RESTConfig() (*rest.Config, error) {
	if o.Kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
}

// Run serves the webhook (and runs the controller) until ctx ends.
func (o *Options) Run(ctx context.Context, log *slog.Logger) error {
	cfg, err := o.RESTConfig()
	if err != nil {
		return fmt.Errorf("cluster configuration: %w", err)
	}
	return RunWithConfig(ctx, log, cfg, o)
}

// RunWithConfig is Run with the cluster's configuration given.
func RunWithConfig(ctx context.Context, log *slog.Logger, cfg *rest.Config, o *Options) error {
	log = log.With("component", "webhook")
	// controller-runtime's informers and admission decoder log through its
	// package-level logger whatever the manager is given; without this they
	// would complain once and then drop their messages.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	var synced atomic.Bool
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced.Load() {
			http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	l := o.Listener
	if l == nil {
		if l, err = net.Listen("tcp", o.Listen); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
	}
	srv := &listenerServer{Server: webhook.NewServer(webhook.Options{WebhookMux: mux}), l: l, certDir: o.CertDir}
	// The informers list and watch through a client of their own, without
	// the timeout: it would cut every watch. Everything else (the client's
	// writes and uncached reads, the API reader, the RESTMapper's
	// discovery, events) goes through the manager's, bounded per request.
	watchHTTP, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	bounded := rest.CopyConfig(cfg)
	bounded.Timeout = cmp.Or(o.KubeTimeout, kubecall.DefaultTimeout)
	mgr, err := ctrl.NewManager(bounded, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(log.Handler()),
		WebhookServer:          srv,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Reviews and reconciles in flight get this long at a shutdown
		// (controller-runtime's default is 30 s, all of Kubernetes' grace
		// period): the process exits within 10 s (docs/operations.md).
		GracefulShutdownTimeout: ptrTo(5 * time.Second),
		// Workloads and services are read as unstructured objects from the
		// informers the controller's watches start, not from the API server
		// on every reconcile.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache:  cache.Options{HTTPClient: watchHTTP},
	})
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	// What every admission reads is cached from the start, so that no
	// review waits for an informer to fill; the kinds of services and
	// workloads are known only from the bindings and cached when first
	// read.
	for _, obj := range []client.Object{&sbv1.ServiceBinding{}, &sbv1.ClusterWorkloadResourceMapping{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("cache %T: %w", obj, err)
		}
	}
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced.Store(true)
		}
	}()
	// GetWebhookServer, unlike the server itself, adds it to the manager.
	mgr.GetWebhookServer().Register(MutatePath, &webhook.Admission{Handler: NewWebhook(mgr.GetClient()), RecoverPanic: ptrTrue()})
	if o.Controller {
		if _, err := SetupReconciler(mgr, log); err != nil {
			return err
		}
	}
	log.Info("serving webhook", "addr", l.Addr().String(), "path", MutatePath)
	return mgr.Start(ctx)
}

func ptrTrue() *bool { t := true; return &t }

func ptrTo[T any](v T) *T { return &v }

// listenerServer is controller-runtime's webhook server (its mux and
// registrations) served on a listener opened beforehand, which its own
// server cannot take: the port is held, port 0 included, before the
// webhook configuration naming it is written. Certificates are reloaded
// when they change, as there.
type listenerServer struct {
	webhook.Server
	l       net.Listener
	certDir string
	started atomic.Bool
}

// Start serves until ctx ends, then shuts down within a minute.
func (s *listenerServer) Start(ctx context.Context) error {
	w, err := certwatcher.New(filepath.Join(s.certDir, "tls.crt"), filepath.Join(s.certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	go func() { _ = w.Start(ctx) }()
	cfg := &tls.Config{NextProtos: []string{"h2", "http/1.1"}, GetCertificate: w.GetCertificate, MinVersion: tls.VersionTLS12}
	srv := &http.Server{Handler: s.WebhookMux(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: serve.IdleTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.started.Store(true)
	if err := srv.Serve(tls.NewListener(s.l, cfg)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// StartedChecker is healthy once the server serves.
func (s *listenerServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		return nil
	}
}

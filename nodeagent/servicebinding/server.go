package servicebinding

import (
	"context"
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
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	sbv1beta1 "github.com/bindery-dev/bindery/apis/servicebinding/v1beta1"
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

	host string
	port int
}

// AddFlags adds the options to fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":9443", "HOST:PORT to serve the webhook (TLS), health and metrics on")
	fs.StringVar(&o.CertDir, "cert-dir", "", "`directory` holding tls.crt and tls.key of the webhook's serving certificate")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig `file` of the cluster; in-cluster configuration when empty")
	fs.BoolVar(&o.Controller, "controller", true, "also run the controller that projects ServiceBindings into existing workloads")
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
// flag, the flag that set it. The port must be given: controller-runtime's
// server takes no port 0.
func (o *Options) ValidateListen(flag string) error {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil || o.port <= 0 || o.port > 65535 {
		return fmt.Errorf("%s %q: want HOST:PORT with a port in 1-65535", flag, o.Listen)
	}
	return nil
}

// Validate returns every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if err := o.ValidateListen("--listen"); err != nil {
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
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sbv1.AddToScheme, sbv1beta1.AddToScheme} {
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
	srv := webhook.NewServer(webhook.Options{
		Host: o.host, Port: o.port, CertDir: o.CertDir, CertName: "tls.crt", KeyName: "tls.key",
		WebhookMux: mux,
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
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
	log.Info("serving webhook", "addr", net.JoinHostPort(o.host, strconv.Itoa(o.port)), "path", MutatePath)
	return mgr.Start(ctx)
}

func ptrTrue() *bool { t := true; return &t }

func ptrTo[T any](v T) *T { return &v }

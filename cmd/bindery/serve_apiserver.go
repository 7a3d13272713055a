package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/migrations"
)

// apiserverOptions are the flags of the aggregated API server.
type apiserverOptions struct {
	listen     string
	dataDir    string
	kubeconfig string
	cluster    string
	tlsCert    string
	tlsKey     string
	hosts      string
	bookmarks  time.Duration
}

func (o *apiserverOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", ":8443", "HOST:PORT to serve servicecatalog.k8s.io/v1beta1 on (HTTPS)")
	fs.StringVar(&o.dataDir, "data-dir", filepath.Join(".bindery", "apiserver"), "directory keeping the server's CA, certificates and kubeconfig")
	fs.StringVar(&o.kubeconfig, "write-kubeconfig", "", "where to write the admin kubeconfig (default <data-dir>/kubeconfig)")
	fs.StringVar(&o.cluster, "kubeconfig", "", "kubeconfig of the cluster whose kube-apiserver aggregates this server (also KUBECONFIG; in a Pod the in-cluster configuration is used): authentication, authorization and admission are delegated to it; none: standalone")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "serving certificate (PEM); default: one issued by the server's own CA in --data-dir")
	fs.StringVar(&o.tlsKey, "tls-private-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&o.hosts, "tls-hosts", "", "comma-separated extra DNS names and IP addresses for the serving certificate the server issues itself")
	fs.DurationVar(&o.bookmarks, "watch-bookmark-interval", time.Minute, "how often watches that allow bookmarks get one")
}

// options turns the flags into the server's Options.
func (o *apiserverOptions) options() *apiserver.Options {
	opts := &apiserver.Options{
		Listen: o.listen, DataDir: o.dataDir, Kubeconfig: o.kubeconfig, BookmarkInterval: o.bookmarks,
		TLSCertFile: o.tlsCert, TLSKeyFile: o.tlsKey,
		ClusterKubeconfig: o.cluster, InCluster: o.cluster == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "",
	}
	for _, h := range strings.Split(o.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			opts.Hosts = append(opts.Hosts, h)
		}
	}
	return opts
}

func (o *apiserverOptions) validate() []error {
	var errs []error
	if o.bookmarks <= 0 {
		errs = append(errs, errors.New("--watch-bookmark-interval: must be positive"))
	}
	opts := o.options()
	if err := opts.Complete(); err != nil {
		errs = append(errs, err)
	} else if err := opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// runServeAPIServer is `bindery serve apiserver`: servicecatalog.k8s.io
// over the catalog's tables, behind the cluster's aggregation layer when
// one is configured, else standalone with the admin kubeconfig it writes
// printed on stdout.
func runServeAPIServer(ctx context.Context, e env, args []string) error {
	var s server
	var o apiserverOptions
	log, pool, _, err := s.start(ctx, e, "serve apiserver", args, "", o.addFlags,
		func(*dbOptions) error { return errors.Join(o.validate()...) }, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	// k8s.io/apiserver logs through klog: send it to the same handler.
	klog.SetSlogLogger(log.With("component", "apiserver"))
	// No encryption keys: the API server reads and writes no secret.
	store := newStore(pool, nil, log)
	opts := o.options()
	return apiserver.Run(ctx, opts, store, log.With("component", "apiserver"), func(c *apiserver.Config) {
		if opts.Delegated() {
			fmt.Fprintf(e.stdout, "Kubernetes API: %s (behind the cluster's aggregation layer)\n", c.Server)
			return
		}
		fmt.Fprintf(e.stdout, "Kubernetes API: %s\nkubeconfig: %s\n", c.Server, opts.Kubeconfig)
	})
}

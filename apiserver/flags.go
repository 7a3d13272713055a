package apiserver

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bindery-dev/bindery/internal/kubecall"
)

// Flags bind Options to a command line: `bindery serve apiserver`'s flags.
type Flags struct {
	Options
	// hosts is --tls-hosts, comma-separated, until Complete splits it.
	hosts string
	// maxWatches is --max-watches-per-user, 0 for no bound.
	maxWatches int
	// kubeTimeout is --kube-request-timeout and bookmarks
	// --watch-bookmark-interval, kept apart from Options' KubeTimeout and
	// BookmarkInterval (where 0 is the default) so that Validate sees a 0.
	kubeTimeout, bookmarks time.Duration
}

// AddFlags registers the server's flags.
func (f *Flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Listen, "listen", ":8443", "HOST:PORT to serve servicecatalog.k8s.io/v1beta1 on (HTTPS)")
	fs.StringVar(&f.DataDir, "data-dir", filepath.Join(".bindery", "apiserver"), "directory keeping the server's CA, certificates and kubeconfig")
	fs.StringVar(&f.Kubeconfig, "write-kubeconfig", "", "where to write the admin kubeconfig (default <data-dir>/kubeconfig)")
	fs.StringVar(&f.ClusterKubeconfig, "kubeconfig", "", "kubeconfig of the cluster whose kube-apiserver aggregates this server (also KUBECONFIG; in a Pod the in-cluster configuration is used): authentication, authorization and admission are delegated to it; none: standalone")
	fs.StringVar(&f.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM); default: one issued by the server's own CA in --data-dir")
	fs.StringVar(&f.TLSKeyFile, "tls-private-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&f.hosts, "tls-hosts", "", "comma-separated extra DNS names and IP addresses for the serving certificate the server issues itself")
	fs.StringVar(&f.CredentialsAudience, "credentials-audience", DefaultCredentialsAudience, "audience of the Pods' service-account tokens that may read a ServiceBinding's credentials subresource directly (the CSIDriver csi.bindery.dev's tokenRequests); behind a cluster only")
	fs.DurationVar(&f.bookmarks, "watch-bookmark-interval", time.Minute, "how often watches that allow bookmarks get one")
	fs.DurationVar(&f.kubeTimeout, kubecall.Flag, kubecall.DelegatedTimeout,
		"timeout of each request the server makes to the cluster's kube-apiserver (TokenReviews, discovery, admission's lookups); its informers' lists and watches are not bounded; behind a cluster only")
	fs.IntVar(&f.maxWatches, "max-watches-per-user", DefaultMaxWatchesPerUser, "the most watches one user may hold open at once (system:masters is not bounded); one more is answered 429 with Retry-After; 0 for no bound")
}

// Complete turns the flags into Options: the list of hosts, the in-cluster
// configuration when running in a Pod without --kubeconfig, then the
// defaults.
func (f *Flags) Complete() error {
	f.Hosts = nil
	for _, h := range strings.Split(f.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			f.Hosts = append(f.Hosts, h)
		}
	}
	f.InCluster = f.ClusterKubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	f.KubeTimeout, f.BookmarkInterval = f.kubeTimeout, f.bookmarks
	f.MaxWatchesPerUser = f.maxWatches
	if f.maxWatches == 0 {
		f.MaxWatchesPerUser = -1 // Options' 0 is the default
	}
	return f.Options.Complete()
}

// Validate reports every problem of the flags at once.
func (f *Flags) Validate() error {
	var errs []error
	if f.bookmarks <= 0 {
		// Options take 0 for the default; a flag says what it means.
		errs = append(errs, errors.New("--watch-bookmark-interval: must be positive"))
	}
	if err := kubecall.Validate(f.kubeTimeout); err != nil {
		errs = append(errs, err)
	}
	if f.maxWatches < 0 {
		errs = append(errs, errors.New("--max-watches-per-user: must not be negative (0: no bound)"))
	}
	return errors.Join(append(errs, f.Options.Validate())...)
}

// Package apiserver serves servicecatalog.k8s.io/v1beta1 with
// k8s.io/apiserver over the catalog's tables: a custom REST storage per
// resource that reads and writes through catalog.Store (no second copy of
// the data), and watch fed by the catalog's change feed, resourceVersion
// being the catalog revision.
//
// It runs in one of two modes. Standalone (no cluster configured), it
// authenticates clients by certificates from a CA it keeps in its data
// directory, treats every authenticated client as an administrator, does
// not require namespaces to exist, and writes a kubeconfig that reaches it
// as AdminUser. Behind kube-apiserver's aggregation layer (a kubeconfig, or
// the in-cluster configuration), it delegates as every extension API server
// does: authentication to the cluster's TokenReview and to the front proxy's
// request headers (trusted through the client CA kube-apiserver publishes
// in kube-system/extension-apiserver-authentication), authorization to
// SubjectAccessReview (so RBAC decides), and it runs the cluster's generic
// admission chain: NamespaceLifecycle (the namespace must exist and not be
// terminating) and the admission webhooks and policies.
package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	mutatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/openapi"
	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/version"
)

var scheme, codecs = newScheme()

// Options are the settings of the server.
type Options struct {
	// Listen is HOST:PORT to serve HTTPS on (":8443" by default).
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests
	// pass one on a free loopback port).
	Listener net.Listener
	// DataDir keeps the CA, the serving and admin certificates.
	DataDir string
	// Kubeconfig is where the admin kubeconfig is written; by default
	// DataDir/kubeconfig.
	Kubeconfig string
	// Hosts are extra DNS names and IP addresses for the serving
	// certificate, besides localhost, the loopback addresses and the host.
	Hosts []string
	// TLSCertFile and TLSKeyFile, when set, are the serving certificate
	// and key (for example from cert-manager) instead of the one the server
	// issues from its own CA. They are reloaded when they change.
	TLSCertFile, TLSKeyFile string
	// ClusterKubeconfig is the kubeconfig of the cluster whose
	// kube-apiserver aggregates this server; with InCluster, the Pod's
	// in-cluster configuration is used instead. Either one turns on the
	// delegated mode the package comment describes; with neither the
	// server runs standalone.
	ClusterKubeconfig string
	InCluster         bool
	// BookmarkInterval is how often a watch that allows bookmarks gets one.
	BookmarkInterval time.Duration
	// ChangeRetention and ChangesRetained are how much of the change feed
	// (catalog.changes) the server keeps for watches that resume from a
	// resourceVersion: every change younger than ChangeRetention, and at
	// least the newest ChangesRetained changes (by default and at least 10
	// minutes and 100,000). Older changes are pruned every PruneInterval
	// (a minute by default); a watch from before them gets 410 Expired.
	ChangeRetention time.Duration
	ChangesRetained int
	PruneInterval   time.Duration
	// CredentialsAudience is the audience of the service-account tokens
	// that, besides the cluster's own, may read the credentials
	// subresource of a ServiceBinding (delegated mode only);
	// DefaultCredentialsAudience when empty.
	CredentialsAudience string
	// MaxWatchesPerUser bounds the watches one user holds open at once
	// (watchShare); DefaultMaxWatchesPerUser when 0, no bound when
	// negative.
	MaxWatchesPerUser int
	// KubeTimeout bounds each single request of the server's own to the
	// cluster (delegated mode only; kubecall.DelegatedTimeout when not
	// positive).
	KubeTimeout time.Duration
}

// The least of the change feed the server keeps: the catalog's.
const (
	MinChangeRetention = catalog.MinChangeRetention
	MinChangesRetained = catalog.MinChangesRetained
)

// Complete fills in defaults.
func (o *Options) Complete() error {
	if o.Listen == "" {
		o.Listen = ":8443"
	}
	if o.DataDir == "" {
		o.DataDir = filepath.Join(".bindery", "apiserver")
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = filepath.Join(o.DataDir, "kubeconfig")
	}
	if o.BookmarkInterval == 0 {
		o.BookmarkInterval = time.Minute
	}
	if o.ChangeRetention == 0 {
		o.ChangeRetention = MinChangeRetention
	}
	if o.ChangesRetained == 0 {
		o.ChangesRetained = MinChangesRetained
	}
	if o.PruneInterval == 0 {
		o.PruneInterval = time.Minute
	}
	if o.MaxWatchesPerUser == 0 {
		o.MaxWatchesPerUser = DefaultMaxWatchesPerUser
	}
	if o.CredentialsAudience == "" {
		o.CredentialsAudience = DefaultCredentialsAudience
	}
	if o.KubeTimeout <= 0 {
		o.KubeTimeout = kubecall.DelegatedTimeout
	}
	return nil
}

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Listener == nil {
		if err := serve.CheckListen("--listen", o.Listen); err != nil {
			errs = append(errs, err)
		}
	}
	if o.BookmarkInterval < 0 {
		errs = append(errs, errors.New("bookmark interval: must be positive"))
	}
	if o.ChangeRetention < MinChangeRetention {
		errs = append(errs, fmt.Errorf("change retention %s: must be at least %s", o.ChangeRetention, MinChangeRetention))
	}
	if o.ChangesRetained < MinChangesRetained {
		errs = append(errs, fmt.Errorf("changes retained %d: must be at least %d", o.ChangesRetained, MinChangesRetained))
	}
	if o.PruneInterval <= 0 {
		errs = append(errs, errors.New("prune interval: must be positive"))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file: give both or neither"))
	}
	if o.TLSCertFile != "" && !o.Delegated() {
		errs = append(errs, errors.New("--tls-cert-file: only behind a cluster (--kubeconfig); standalone, the server serves a certificate of its own CA, which the kubeconfig it writes trusts"))
	}
	return errors.Join(errs...)
}

// Delegated says whether the server runs behind kube-apiserver, delegating
// authentication and authorization to it.
func (o *Options) Delegated() bool { return o.ClusterKubeconfig != "" || o.InCluster }

// Config is a server ready to be built: its PKI made, its listener open.
type Config struct {
	opts Options
	// generic holds, delegated, the cluster's client and informers (for
	// admission) too.
	generic *genericapiserver.RecommendedConfig
	store   *catalog.Store
	log     *slog.Logger
	// lists answers list requests; its storages are set by New.
	lists   *listServer
	watches *watchShare
	// Server is the URL clients reach the server at, as the kubeconfig says.
	Server string
	// CAData is the PEM bundle that verifies the serving certificate the
	// server issued itself (an APIService's caBundle); nil when the
	// certificate comes from TLSCertFile.
	CAData []byte
}

// Config makes the PKI, opens the listener and, standalone, writes the
// kubeconfig; delegated, it reads the cluster's authentication
// configuration.
func (o *Options) Config(store *catalog.Store, log *slog.Logger) (*Config, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := o.Listener
	if l == nil {
		var err error
		if l, err = serve.Listen("--listen", o.Listen); err != nil {
			return nil, err
		}
	}
	addr := l.Addr().(*net.TCPAddr)
	hosts, ips := o.certNames(addr)
	// Delegated with a certificate given, the server needs no PKI of its
	// own (and its data directory may be read-only).
	var p *dataPKI
	if !o.Delegated() || o.TLSCertFile == "" {
		var err error
		if p, err = loadPKI(o.DataDir, hosts, ips); err != nil {
			l.Close()
			return nil, err
		}
	}
	host := "127.0.0.1"
	if !addr.IP.IsUnspecified() {
		host = addr.IP.String()
	}
	server := "https://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
	if !o.Delegated() {
		if err := p.writeKubeconfig(o.Kubeconfig, server); err != nil {
			l.Close()
			return nil, fmt.Errorf("write the kubeconfig: %w", err)
		}
	}

	rc := genericapiserver.NewRecommendedConfig(codecs)
	cfg := &rc.Config
	cfg.Serializer = withoutProtobuf{codecs}
	cfg.EffectiveVersion = newReportedVersion(compatibility.DefaultBuildEffectiveVersion(), version.String())
	serving := genericoptions.NewSecureServingOptions()
	serving.Listener = l
	// The aggregator multiplexes every client's requests, watches
	// included, over few connections (as RecommendedOptions has it).
	serving.HTTP2MaxStreamsPerConnection = 1000
	if o.TLSCertFile != "" {
		serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile}
	} else {
		serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: p.path(servingCertFile), KeyFile: p.path(servingKeyFile)}
	}
	if err := serving.WithLoopback().ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		l.Close()
		return nil, fmt.Errorf("secure serving: %w", err)
	}
	c := &Config{opts: *o, generic: rc, store: store, log: log, Server: server, lists: &listServer{},
		watches: newWatchShare(o.MaxWatchesPerUser)}
	// Lists are answered inside the filter chain, before k8s.io/apiserver's
	// handlers (list.go), selectors with a NUL and writes whose bodies
	// nest too deep are refused there (decode.go), and a user's watches
	// past its share (watchshare.go).
	cfg.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(plainSelectors(c.watches.wrap(c.lists.wrap(shallowBodies(h, gc.MaxRequestBodyBytes)))), gc)
	}
	if o.TLSCertFile == "" {
		c.CAData = p.caPEM
	}
	var err error
	if o.Delegated() {
		err = c.delegate()
	} else {
		err = c.standalone(p)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	setOpenAPI(cfg)
	cfg.ExternalAddress = net.JoinHostPort(host, strconv.Itoa(addr.Port))
	cfg.HealthzChecks = append(cfg.HealthzChecks, dbCheck{store})
	cfg.ReadyzChecks = append(cfg.ReadyzChecks, dbCheck{store})
	return c, nil
}

// setOpenAPI has the server publish the API's OpenAPI v2 and v3
// documents, as Bindery's.
func setOpenAPI(cfg *genericapiserver.Config) {
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Bindery"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Bindery"
}

// certNames are the host names and addresses the serving certificate is
// for: localhost and loopback, this machine's name, the address listened
// on when it is a specific one, and --hosts.
func (o *Options) certNames(addr *net.TCPAddr) ([]string, []net.IP) {
	hosts, ips := []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	if !addr.IP.IsUnspecified() && !addr.IP.IsLoopback() {
		ips = append(ips, addr.IP)
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			hosts = append(hosts, h)
		}
	}
	return hosts, ips
}

// standalone trusts client certificates from the server's own CA, and
// lets every authenticated client do everything.
func (c *Config) standalone(p *dataPKI) error {
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca", p.caPEM)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	c.generic.SecureServing.ClientCA = ca
	c.generic.Authentication.Authenticator = union.New(
		x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion),
		anonymousHealth{},
	)
	c.generic.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	// No admission plugins: in particular no NamespaceLifecycle, so
	// namespaces need not exist.
	c.generic.AdmissionControl = admission.NewChainHandler()
	return nil
}

// delegate hands authentication, authorization and admission to the
// cluster, with k8s.io/apiserver's own options for aggregated servers.
func (c *Config) delegate() error {
	kubeconfig := c.opts.ClusterKubeconfig
	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = kubeconfig
	if err := authn.ApplyTo(&c.generic.Authentication, c.generic.SecureServing, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = kubeconfig
	if err := authz.ApplyTo(&c.generic.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	core := genericoptions.NewCoreAPIOptions()
	core.CoreAPIKubeconfigPath = kubeconfig
	if err := core.ApplyTo(c.generic); err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	// kube makes single requests only (TokenReviews, discovery, and the
	// admission plugins' lookups of namespaces missing from their
	// informers, which k8s.io/apiserver makes without a deadline): each is
	// bounded, so that a request kube-apiserver never answers does not
	// hold a request of this server, and its seat, for good. The informers
	// list and watch through clients of their own (core.ApplyTo's, dyn).
	bounded := restclient.CopyConfig(c.generic.ClientConfig)
	bounded.Timeout = cmp.Or(c.opts.KubeTimeout, kubecall.DelegatedTimeout)
	kube, err := kubernetes.NewForConfig(bounded)
	if err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	// Pods' tokens of Bindery's audience, on the credentials subresource
	// only (credentialsAuthenticator), before the cluster's own.
	creds, err := newCredentialsAuthenticator(kube.AuthenticationV1(), cmp.Or(c.opts.CredentialsAudience, DefaultCredentialsAudience))
	if err != nil {
		return err
	}
	c.generic.Authentication.Authenticator = union.New(creds, c.generic.Authentication.Authenticator)
	dyn, err := dynamic.NewForConfig(c.generic.ClientConfig)
	if err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	adm := genericoptions.NewAdmissionOptions()
	if adm.DisablePlugins, err = missingPolicyAPIs(kube.Discovery()); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	for _, p := range adm.DisablePlugins {
		c.log.Warn("the cluster does not serve the API of an admission plugin: it is off", "plugin", p)
	}
	if err := adm.ApplyTo(&c.generic.Config, c.generic.SharedInformerFactory, kube, dyn, utilfeature.DefaultFeatureGate, c.generic.EffectiveVersion); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	return nil
}

// missingPolicyAPIs names the admission policy plugins whose API
// (admissionregistration.k8s.io/v1) the cluster does not serve: their
// informers would never sync, and the server never be ready. Mutating
// admission policies are v1 from Kubernetes 1.36.
func missingPolicyAPIs(d discovery.DiscoveryInterface) ([]string, error) {
	list, err := d.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return nil, fmt.Errorf("discover admissionregistration.k8s.io/v1: %w", err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	var off []string
	for resource, plugin := range map[string]string{
		"validatingadmissionpolicies": validatingadmissionpolicy.PluginName,
		"mutatingadmissionpolicies":   mutatingadmissionpolicy.PluginName,
	} {
		if !served[resource] {
			off = append(off, plugin)
		}
	}
	slices.Sort(off)
	return off, nil
}

// anonymousHealth lets probes read /healthz, /livez and /readyz without a
// certificate.
type anonymousHealth struct{}

func (anonymousHealth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	switch p := r.URL.Path; {
	case p == "/healthz" || p == "/livez" || p == "/readyz" ||
		len(p) > 8 && (p[:9] == "/healthz/" || p[:7] == "/livez/" || p[:8] == "/readyz/"):
		return &authenticator.Response{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
	}
	return nil, false, nil
}

// dbCheck is the database's part of /healthz and /readyz.
type dbCheck struct{ store *catalog.Store }

func (dbCheck) Name() string { return "database" }

func (c dbCheck) Check(r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	return c.store.Ping(ctx)
}

// Server is the built server.
type Server struct {
	generic *genericapiserver.GenericAPIServer
	hub     *hub
	log     *slog.Logger
	opts    Options
	// bg lives as long as the server: background work of requests (a new
	// broker's relist) runs under it, counted by relists.
	bg      context.Context
	stopBg  context.CancelFunc
	relists sync.WaitGroup
	// loops run as long as the server does: the watch hub and the change
	// feed's pruner.
	loops []func(context.Context)
	// authz decides which cluster plans restricted to namespaces a user
	// sees (planAccess).
	authz authorizer.Authorizer
}

// New builds the server and installs servicecatalog.k8s.io/v1beta1.
func (c *Config) New() (*Server, error) {
	gs, err := c.generic.Complete().New("bindery-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("build the API server: %w", err)
	}
	bg, stop := context.WithCancel(context.Background())
	s := &Server{generic: gs, hub: newHub(c.store, c.log), log: c.log, opts: c.opts, bg: bg, stopBg: stop, authz: c.generic.Authorization.Authorizer}
	retain := catalog.Retention{MinAge: c.opts.ChangeRetention, MinCount: c.opts.ChangesRetained, Every: c.opts.PruneInterval}
	s.loops = []func(context.Context){
		s.hub.run,
		func(ctx context.Context) { c.store.Feed().RunPruner(ctx, retain) },
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(v1beta1.GroupName, scheme, metav1.ParameterCodec, codecs)
	info.NegotiatedSerializer = withoutProtobuf{codecs}
	storages := s.storages(c.store, c.opts.BookmarkInterval)
	info.VersionedResourcesStorageMap[v1beta1.SchemeGroupVersion.Version] = storages
	c.lists.storages = map[string]*storage{}
	for resource, rs := range storages {
		if st := storageOf(rs); st != nil && !strings.Contains(resource, "/") {
			c.lists.storages[resource] = st
		}
	}
	if err := gs.InstallAPIGroup(&info); err != nil {
		stop()
		return nil, fmt.Errorf("install %s: %w", v1beta1.SchemeGroupVersion, err)
	}
	return s, nil
}

// storages builds the REST storage of every resource.
func (s *Server) storages(store *catalog.Store, bookmarkEvery time.Duration) map[string]rest.Storage {
	base := func(k *kindInfo, plural, singular string, namespaced bool, short ...string) *storage {
		return &storage{
			kind: k.kind, resource: v1beta1.Resource(plural), singular: singular, shortNames: short, namespaced: namespaced,
			newFn: k.newObj, newListFn: k.newList, table: k.table, store: store, hub: s.hub, bookmarkEvery: bookmarkEvery,
		}
	}
	instances := base(instanceKind, "serviceinstances", "serviceinstance", true)
	bindings := base(bindingKind, "servicebindings", "servicebinding", true)
	brokers := base(clusterBrokerKind, "clusterservicebrokers", "clusterservicebroker", false)
	classes := base(clusterClassKind, "clusterserviceclasses", "clusterserviceclass", false)
	plans := base(clusterPlanKind, "clusterserviceplans", "clusterserviceplan", false)
	plans.access = &planAccess{authz: s.authz}
	// A team's own brokers, classes and plans: the same catalog rows, in
	// a namespace.
	nsBrokers := base(brokerKind, "servicebrokers", "servicebroker", true)
	nsClasses := base(classKind, "serviceclasses", "serviceclass", true)
	nsPlans := base(planKind, "serviceplans", "serviceplan", true)
	brokerStrategy := newStrategy(scheme, false, false)
	nsBrokerStrategy := newStrategy(scheme, true, false)
	// Standalone, no process can read brokers' credentials from Secrets.
	brokerStrategy.secretRefs = s.opts.Delegated()
	nsBrokerStrategy.secretRefs = s.opts.Delegated()
	relist := func(id string) {
		s.relists.Go(func() {
			ctx, cancel := context.WithTimeout(s.bg, time.Minute)
			defer cancel()
			// Unprocessable: its credentials are in a Secret this server
			// does not read; the engine's relister, which does, fetches it.
			if _, err := store.Relist(ctx, id); err != nil && !errors.Is(err, catalog.ErrUnprocessable) {
				s.log.WarnContext(ctx, "fetch the catalog of a new broker", "broker", id, "err", err)
			}
		})
	}
	return map[string]rest.Storage{
		"serviceinstances":        &instanceStorage{storage: instances, strategy: newStrategy(scheme, true, false)},
		"serviceinstances/status": &statusStorage{readOnlyStatus{instances}, newStrategy(scheme, true, true)},
		"servicebindings":         &bindingStorage{storage: bindings, strategy: newStrategy(scheme, true, false)},
		"servicebindings/status":  &statusStorage{readOnlyStatus{bindings}, newStrategy(scheme, true, true)},
		// Read as the caller, never by the view role (deploy/bindery).
		"servicebindings/credentials": &credentialsStorage{store: store},
		"clusterservicebrokers":       &brokerStorage{storage: brokers, strategy: brokerStrategy, relist: relist},
		// The engine writes a broker's status through the catalog: the
		// subresource reads it.
		"clusterservicebrokers/status": &readOnlyStatus{brokers},
		// Classes and plans come from brokers' catalogs, and so does
		// their status (removedFromBrokerCatalog): it is read only.
		"clusterserviceclasses":        classes,
		"clusterserviceclasses/status": &readOnlyStatus{classes},
		"clusterserviceplans":          plans,
		"clusterserviceplans/status":   &readOnlyStatus{plans},
		"servicebrokers":               &brokerStorage{storage: nsBrokers, strategy: nsBrokerStrategy, relist: relist},
		"servicebrokers/status":        &readOnlyStatus{nsBrokers},
		"serviceclasses":               nsClasses,
		"serviceclasses/status":        &readOnlyStatus{nsClasses},
		"serviceplans":                 nsPlans,
		"serviceplans/status":          &readOnlyStatus{nsPlans},
	}
}

// Run serves until ctx ends, following the change feed for watchers and
// pruning it (catalog.Feed.RunPruner: whichever process owns the catalog
// prunes, one replica at a time). It returns once the hub, the pruner and
// the relists of new brokers have ended.
func (s *Server) Run(ctx context.Context) error {
	defer s.relists.Wait()
	defer s.stopBg()
	bgCtx, stop := context.WithCancel(ctx)
	var loops sync.WaitGroup
	defer loops.Wait()
	defer stop()
	for _, loop := range s.loops {
		loops.Go(func() { loop(bgCtx) })
	}
	if err := s.generic.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Run builds the server from options and serves until ctx ends: the one
// call `bindery serve apiserver` and `bindery up` make. ready, when not
// nil, is called with the config once the kubeconfig is written.
func Run(ctx context.Context, o *Options, store *catalog.Store, log *slog.Logger, ready func(*Config)) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := o.Complete(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := o.Config(store, log)
	if err != nil {
		return err
	}
	srv, err := cfg.New()
	if err != nil {
		return err
	}
	if ready != nil {
		ready(cfg)
	}
	if o.Delegated() {
		log.InfoContext(ctx, "serving the Kubernetes API behind the cluster's aggregation layer", "url", cfg.Server)
	} else {
		log.InfoContext(ctx, "serving the Kubernetes API", "url", cfg.Server, "kubeconfig", o.Kubeconfig)
	}
	return srv.Run(ctx)
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/deploy"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
	"github.com/bindery-dev/bindery/restapi"
)

// generated are the credentials `bindery up` makes once and keeps in the
// data directory, so a restart presents the same ones.
type generated struct {
	BrokerUsername string `json:"broker_username"`
	BrokerPassword string `json:"broker_password"`
	BrokerToken    string `json:"broker_token"`
	AdminToken     string `json:"admin_token,omitempty"`
}

// builtinBroker is the name under which `bindery up` registers its own
// broker in the catalog.
const builtinBroker = "bindery"

// upOptions are the flags of `bindery up`: every component's, the shared
// database and encryption key, and where the state is kept.
type upOptions struct {
	db         dbOptions
	keys       keyOptions
	broker     broker.Options
	catalog    restapi.Options
	controller controller.Options
	brokers    brokerCalls
	limits     storeLimits
	apiListen  string
	// webhook is the servicebinding.io webhook and controller, run when a
	// cluster is configured and --webhook-listen is not empty.
	webhook servicebinding.Options
	dataDir string
	level   string
}

func (o *upOptions) addFlags(fs *flag.FlagSet) {
	o.db.addFlags(fs)
	o.keys.addFlags(fs, sealsCredentials)
	o.broker.AddFlags(fs, "broker-listen", "127.0.0.1:8081")
	// Everything up runs stops within 5 s of SIGTERM: the broker's running
	// operations get 2 (they are resumed at the next start).
	grace := fs.Lookup("shutdown-grace")
	grace.DefValue = upShutdownGrace.String()
	_ = grace.Value.Set(grace.DefValue)
	o.catalog.AddFlags(fs, "catalog-listen", "127.0.0.1:8080")
	o.controller.AddFlags(fs, "controller-listen", "127.0.0.1:8082")
	// The engine's --kube-request-timeout bounds the webhook's requests
	// too (validateWebhook): one cluster, one bound. The API server runs
	// standalone and makes none.
	fs.Lookup(kubecall.Flag).Usage = "timeout of each request to kube-apiserver of the engine (Secrets, Events) and of the servicebinding.io webhook, its controller and its installation; informers' lists and watches are not bounded"
	o.brokers.addFlags(fs, true)
	o.limits.addFlags(fs)
	fs.StringVar(&o.apiListen, "apiserver-listen", "127.0.0.1:8443", "HOST:PORT of the servicecatalog.k8s.io API (HTTPS; kubeconfig in the data directory)")
	fs.StringVar(&o.webhook.Listen, "webhook-listen", "127.0.0.1:9443", "HOST:PORT of the servicebinding.io webhook (HTTPS), run with a cluster (--kubeconfig); the cluster's API server must reach it. Port 0 picks a free one; empty: no webhook")
	fs.StringVar(&o.dataDir, "data-dir", defaultDataDir, "where Bindery keeps its state: PostgreSQL, encryption key, generated credentials")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn, error")
}

// upShutdownGrace is --shutdown-grace's default under up.
const upShutdownGrace = 2 * time.Second

// defaultDataDir is where `bindery up` keeps its state unless told
// otherwise; `bindery token` looks there too.
const defaultDataDir = ".bindery"

// runUp is `bindery up`: everything on one machine, state in --data-dir.
// What can be checked without the database is, before anything is made:
// the flags, the listeners' ports and the encryption key.
func runUp(ctx context.Context, e env, args []string) error {
	var o upOptions
	fs := newFlagSet(e, "up")
	o.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.keys.complete(fs)
	log, err := e.logger(o.level)
	if err != nil {
		return err
	}
	storeOpts, ls, err := o.validateAndListen()
	if err != nil {
		return err
	}
	// The servers close their listeners when they stop; this closes them
	// on the way out before (closing twice is harmless).
	defer closeAll(ls)
	dir, err := prepareDataDir(o.dataDir)
	if err != nil {
		return err
	}
	keys, err := o.completeKeys(dir)
	if err != nil {
		return err
	}
	var ready []serve.Check
	if o.db.url == "" {
		db, err := startEmbedded(ctx, log, dir)
		if err != nil {
			return err
		}
		defer db.stop()
		o.db.url, ready = db.url, append(ready, db.srv.Status)
	}
	creds, err := o.completeFromDataDir(dir)
	if err != nil {
		return err
	}
	if err := o.broker.Validate(); err != nil {
		return err
	}
	pool, err := o.db.open(ctx, log, migrations.Schemas()...)
	if err != nil {
		return err
	}
	defer pool.Close()
	cluster, err := o.controller.ConnectCluster(ctx)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, pool, keys, log, append(storeOpts, cluster.StoreOptions()...)...)
	if err != nil {
		return err
	}
	if creds.AdminToken, err = catalog.EnsureAdminToken(ctx, store, creds.AdminToken); err != nil {
		return err
	}
	if err := saveGenerated(filepath.Join(dir, credentialsFile), creds); err != nil {
		return err
	}
	u := &up{o: &o, log: log, dir: dir, ls: ls, pool: pool, keys: keys, store: store, cluster: cluster, creds: creds, stdout: e.stdout, ready: ready}
	if cluster != nil && o.webhook.Listen != "" {
		if err := u.installWebhook(ctx); err != nil {
			return err
		}
		defer u.uninstallWebhookConfiguration()
	}
	if err := u.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// embedded is the PostgreSQL `bindery up` runs when DATABASE_URL is not
// set, kept running while up runs.
type embedded struct {
	srv  *pgserver.Server
	url  string
	stop func()
}

// startEmbedded starts the data directory's PostgreSQL and supervises it
// until ctx ends: when it exits, it is started again, with backoff, and
// /readyz says so meanwhile. stop ends the supervision and stops the
// server.
func startEmbedded(ctx context.Context, log *slog.Logger, dir string) (*embedded, error) {
	srv, url, err := embeddedDatabase(ctx, log, dir, pgserver.Start)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		srv.Supervise(sctx, log.With("component", "postgres"))
	}()
	return &embedded{srv: srv, url: url, stop: func() {
		cancel()
		<-supervised
		if err := srv.Stop(); err != nil {
			log.Warn("stop the embedded PostgreSQL", "error", err)
		}
	}}, nil
}

// prepareDataDir makes the data directory, its owner's only: it holds the
// encryption key and the admin token. As root, others may traverse it (not
// list it), so that PostgreSQL's user reaches its own directory inside.
func prepareDataDir(path string) (string, error) {
	dir, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o711
	}
	if err := os.Chmod(dir, mode); err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	return dir, nil
}

// listen opens every listener of up (broker, catalog, controller,
// apiserver, the order up.run takes them, and the webhook's when asked),
// or none; every address that cannot be listened on is reported with its
// flag.
func (o *upOptions) listen(webhook bool) ([]net.Listener, error) {
	var ls []net.Listener
	var errs []error
	addrs := []struct{ flag, addr string }{
		{"broker-listen", o.broker.Listen},
		{"catalog-listen", o.catalog.Listen},
		{"controller-listen", o.controller.Listen},
		{"apiserver-listen", o.apiListen},
	}
	if webhook {
		addrs = append(addrs, struct{ flag, addr string }{"webhook-listen", o.webhook.Listen})
	}
	for _, f := range addrs {
		l, err := net.Listen("tcp", f.addr)
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			errs = append(errs, fmt.Errorf("--%s %s: the port is in use by another program (another bindery up?): stop it, or give --%s another address (port 0 picks a free one)", f.flag, f.addr, f.flag))
		case err != nil:
			errs = append(errs, fmt.Errorf("--%s %s: %w", f.flag, f.addr, err))
		default:
			ls = append(ls, l)
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll(ls)
		return nil, err
	}
	return ls, nil
}

// up is `bindery up` once its database is ready: the components to run
// together.
type up struct {
	o       *upOptions
	log     *slog.Logger
	dir     string
	ls      []net.Listener // broker, catalog, controller, apiserver[, webhook]
	pool    *pgxpool.Pool
	keys    *keyring.Keyring
	store   *catalog.Store
	cluster *controller.Cluster
	creds   generated
	stdout  io.Writer
	// ready are readiness checks for every server besides their
	// database's: the embedded PostgreSQL's supervision.
	ready []serve.Check
	// webhookURL is where the cluster calls the webhook; empty when it
	// does not run. kube is the cluster's configuration, for it.
	webhookURL string
	kube       *rest.Config
}

// run runs every component until ctx ends or one fails, and returns once
// all have stopped.
func (u *up) run(ctx context.Context) error {
	o, log, store := u.o, u.log, u.store
	brokerL, catalogL, controllerL, apiL := u.ls[0], u.ls[1], u.ls[2], u.ls[3]
	g, gctx := errgroup.WithContext(ctx)
	cluster := u.cluster
	g.Go(func() error { return cluster.Run(gctx) })
	g.Go(func() error { return runBroker(gctx, log, u.pool, u.keys, &o.broker, brokerL, u.ready...) })
	g.Go(func() error {
		return runCatalog(gctx, log, store, &o.catalog, catalogL, u.ready...)
	})
	g.Go(func() error {
		return controller.Run(gctx, o.controller.Config(store, cluster, log.With("component", "controller")), controllerL)
	})
	alog := log.With("component", "apiserver")
	klog.SetSlogLogger(alog)
	kubeconfig := filepath.Join(u.dir, "kubeconfig")
	apiReady := make(chan string, 1)
	g.Go(func() error {
		return apiserver.Run(gctx, &apiserver.Options{
			Listener: apiL, DataDir: filepath.Join(u.dir, "apiserver"), Kubeconfig: kubeconfig,
		}, store, alog, func(c *apiserver.Config) { apiReady <- c.Server })
	})
	if u.webhookURL != "" {
		g.Go(func() error {
			return servicebinding.RunWithConfig(gctx, log, u.kube, &o.webhook)
		})
	}
	var apiURL string
	select {
	case apiURL = <-apiReady:
	case <-gctx.Done():
		return g.Wait()
	}
	// The built-in broker is the catalog's first broker, and its services
	// are listed before up says it is ready: a command typed right after
	// the banner finds them. A failure to reach it shows in its status and
	// is retried by the relister.
	auth := &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: o.broker.Username, Password: o.broker.Password}}
	regCtx, cancel := context.WithTimeout(gctx, builtinRegisterTimeout)
	err := catalog.EnsureBroker(regCtx, store, builtinBroker, "http://"+brokerL.Addr().String(), auth)
	cancel()
	if gctx.Err() != nil {
		return g.Wait()
	}
	if err != nil {
		log.Warn("register the built-in broker", "error", err)
	}
	u.printUp(catalogL.Addr(), brokerL.Addr(), apiURL, kubeconfig)
	return g.Wait()
}

// builtinRegisterTimeout bounds how long up waits for its own broker's
// catalogue before it prints its banner anyway.
const builtinRegisterTimeout = 15 * time.Second

// cliName is how to run this program again from the current directory:
// bin/bindery after `make run`, bindery when it is on the PATH.
func cliName() string {
	exe, err := os.Executable()
	if err != nil {
		return "bindery"
	}
	if p, err := exec.LookPath("bindery"); err == nil {
		if same, _ := filepath.EvalSymlinks(p); same == exe {
			return "bindery"
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return exe
}

// printUp is the one place credentials are shown: stdout, never the log.
func (u *up) printUp(catalogAddr, brokerAddr net.Addr, apiURL, kubeconfig string) {
	w, o := u.stdout, u.o
	fmt.Fprintln(w, "Bindery is up.")
	fmt.Fprintf(w, "  web UI:          http://%s/ (sign in with the admin token)\n", catalogAddr)
	fmt.Fprintf(w, "  REST API:        http://%s/api/v1\n", catalogAddr)
	fmt.Fprintf(w, "  Kubernetes API:  %s (kubectl --kubeconfig %s get serviceinstances -A)\n", apiURL, kubeconfig)
	fmt.Fprintf(w, "  admin token:     %s (kept as admin_token in %s)\n", u.creds.AdminToken, filepath.Join(u.dir, credentialsFile))
	fmt.Fprintf(w, "  CLI login:       %s login http://%s (paste the admin token when asked)\n", cliName(), catalogAddr)
	if u.webhookURL != "" {
		fmt.Fprintf(w, "  webhook:         %s (servicebinding.io, installed in the cluster)\n", u.webhookURL)
	}
	fmt.Fprintf(w, "  OSB broker:      http://%s/v2/catalog\n", brokerAddr)
	fmt.Fprintf(w, "  broker username: %s\n", o.broker.Username)
	fmt.Fprintf(w, "  broker password: %s\n", o.broker.Password)
	if o.broker.Token != "" {
		fmt.Fprintf(w, "  broker token:    %s\n", o.broker.Token)
	}
	fmt.Fprintf(w, "  database:        %s\n", redact(o.db.url))
	fmt.Fprintf(w, "  data directory:  %s\n", u.dir)
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

// validateWebhook checks --webhook-listen, unless it is empty, and gives
// the webhook the engine's --kube-request-timeout.
func (o *upOptions) validateWebhook() error {
	if o.webhook.Listen == "" {
		return nil
	}
	o.webhook.Controller = true
	o.webhook.KubeTimeout = o.controller.KubeTimeout
	if err := o.webhook.Complete(); err != nil {
		return err
	}
	return o.webhook.ValidateListen("--webhook-listen")
}

// installWebhook prepares the servicebinding.io webhook to run beside the
// cluster: its certificates under <data-dir>/webhook, and the CRDs and the
// MutatingWebhookConfiguration of deploy/servicebinding in the cluster.
func (u *up) installWebhook(ctx context.Context) error {
	cfg, err := u.o.controller.RESTConfig()
	if err != nil {
		return err
	}
	m, err := webhookManifests()
	if err != nil {
		return err
	}
	u.o.webhook.Listener = u.ls[4]
	if u.webhookURL, err = servicebinding.InstallLocal(ctx, u.log, cfg, &u.o.webhook, filepath.Join(u.dir, "webhook"), m); err != nil {
		return fmt.Errorf("install the servicebinding.io webhook: %w", err)
	}
	u.kube = cfg
	return u.o.webhook.Validate()
}

// webhookManifests reads deploy/servicebinding's CRDs and webhook
// configuration, embedded in the binary.
func webhookManifests() (servicebinding.Manifests, error) {
	var m servicebinding.Manifests
	crds, err := fs.Glob(deploy.ServiceBinding, "servicebinding/crd/*.yaml")
	if err != nil {
		return m, err
	}
	for _, name := range crds {
		data, err := deploy.ServiceBinding.ReadFile(name)
		if err != nil {
			return m, err
		}
		m.CRDs = append(m.CRDs, data)
	}
	m.WebhookConfiguration, err = deploy.ServiceBinding.ReadFile("servicebinding/webhook.yaml")
	return m, err
}

// credentialsFile is where, in the data directory, the generated
// credentials are kept.
const credentialsFile = "credentials.json"

// completeKeys reads the encryption keys from the data directory's file,
// made the first time, unless the flag or its variable gives them.
func (o *upOptions) completeKeys(dir string) (*keyring.Keyring, error) {
	if o.keys.encryptionKey == "" {
		path := filepath.Join(dir, "encryption.key")
		var err error
		if o.keys.encryptionKey, err = readOrCreate(path, keyring.Generate); err != nil {
			return nil, err
		}
		o.keys.source = path
	}
	return o.keys.keyring()
}

// completeFromDataDir fills the broker's credentials the flags leave out
// from the data directory, generating them the first time, and returns the
// generated credentials.
func (o *upOptions) completeFromDataDir(dir string) (generated, error) {
	creds, err := loadGenerated(filepath.Join(dir, credentialsFile))
	if err != nil {
		return generated{}, err
	}
	if !o.broker.HasCredentials() {
		o.broker.Username, o.broker.Password, o.broker.Token = creds.BrokerUsername, creds.BrokerPassword, creds.BrokerToken
	}
	o.broker.Complete(o.db.url)
	return creds, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// readOrCreate returns the content of path, creating it (mode 0600) with
// make() the first time.
func readOrCreate(path string, make func() string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		// Made readable by others by hand or an older version: not any more.
		return strings.TrimSpace(string(b)), os.Chmod(path, 0o600)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	v := make()
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", err
	}
	return v, nil
}

func loadGenerated(path string) (generated, error) {
	var g generated
	raw, err := readOrCreate(path, func() string {
		b, _ := json.MarshalIndent(generated{
			BrokerUsername: "bindery",
			BrokerPassword: randomSecret(),
			BrokerToken:    randomSecret(),
		}, "", "  ")
		return string(b)
	})
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal([]byte(raw), &g); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

func saveGenerated(path string, g generated) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// randomSecret is 256 random bits, URL-safe.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// redact hides the password of a connection URL; a connection string
// that is not a URL is shown as given.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return s
	}
	return u.Redacted()
}

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
	"path/filepath"
	"strings"

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
	o.catalog.AddFlags(fs, "catalog-listen", "127.0.0.1:8080")
	o.controller.AddFlags(fs, "controller-listen", "127.0.0.1:8082")
	o.brokers.addFlags(fs, true)
	fs.StringVar(&o.apiListen, "apiserver-listen", "127.0.0.1:8443", "HOST:PORT of the servicecatalog.k8s.io API (HTTPS; kubeconfig in the data directory)")
	fs.StringVar(&o.webhook.Listen, "webhook-listen", "127.0.0.1:9443", "HOST:PORT of the servicebinding.io webhook (HTTPS), run with a cluster (--kubeconfig); the cluster's API server must reach it. Empty: no webhook")
	fs.StringVar(&o.dataDir, "data-dir", ".bindery", "where Bindery keeps its state: PostgreSQL, encryption key, generated credentials")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn, error")
}

// runUp is `bindery up`: everything on one machine, state in --data-dir.
func runUp(ctx context.Context, e env, args []string) error {
	var o upOptions
	fs := newFlagSet(e, "up")
	o.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := e.logger(o.level)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	// Its owner only: it holds the encryption key and the admin token. As
	// root, others may traverse it (not list it), so that PostgreSQL's user
	// reaches its own directory inside.
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o711
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if o.db.url == "" {
		srv, err := startEmbedded(ctx, log, dir)
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				log.Warn("stop the embedded PostgreSQL", "error", err)
			}
		}()
		if o.db.url, err = srv.EnsureDatabase(ctx, "bindery"); err != nil {
			return err
		}
	}
	creds, err := o.completeFromDataDir(dir)
	if err != nil {
		return err
	}
	keys, err := o.keys.keyring()
	storeOpts, serr := o.brokers.storeOptions()
	if err := errors.Join(err, serr, o.broker.Validate(), o.catalog.Validate(), o.controller.Validate(), o.validateWebhook()); err != nil {
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
	u := &up{o: &o, log: log, dir: dir, pool: pool, keys: keys, store: store, cluster: cluster, creds: creds, stdout: e.stdout}
	if cluster != nil && o.webhook.Listen != "" {
		if err := u.installWebhook(ctx); err != nil {
			return err
		}
	}
	if err := u.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// up is `bindery up` once its database is ready: the components to run
// together.
type up struct {
	o       *upOptions
	log     *slog.Logger
	dir     string
	pool    *pgxpool.Pool
	keys    *keyring.Keyring
	store   *catalog.Store
	cluster *controller.Cluster
	creds   generated
	stdout  io.Writer
	// webhookURL is where the cluster calls the webhook; empty when it
	// does not run. kube is the cluster's configuration, for it.
	webhookURL string
	kube       *rest.Config
}

// run runs every component until ctx ends or one fails, and returns once
// all have stopped.
func (u *up) run(ctx context.Context) error {
	o, log, store := u.o, u.log, u.store
	ls, err := listenAll(o.broker.Listen, o.catalog.Listen, o.controller.Listen)
	if err != nil {
		return err
	}
	brokerL, catalogL, controllerL := ls[0], ls[1], ls[2]
	g, gctx := errgroup.WithContext(ctx)
	cluster := u.cluster
	g.Go(func() error { return cluster.Run(gctx) })
	g.Go(func() error { return runBroker(gctx, log, u.pool, u.keys, &o.broker, brokerL) })
	g.Go(func() error {
		return runCatalog(gctx, log, store, &o.catalog, catalogL)
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
			Listen: o.apiListen, DataDir: filepath.Join(u.dir, "apiserver"), Kubeconfig: kubeconfig,
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
	g.Go(func() error {
		// The built-in broker is the catalog's first broker; a failure to
		// reach it shows in its status and is retried by the relister.
		auth := &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: o.broker.Username, Password: o.broker.Password}}
		err := catalog.EnsureBroker(gctx, store, builtinBroker, "http://"+brokerL.Addr().String(), auth)
		if err != nil && gctx.Err() == nil {
			log.Warn("register the built-in broker", "error", err)
		}
		return nil
	})
	u.printUp(catalogL.Addr(), brokerL.Addr(), apiURL, kubeconfig)
	return g.Wait()
}

// printUp is the one place credentials are shown: stdout, never the log.
func (u *up) printUp(catalogAddr, brokerAddr net.Addr, apiURL, kubeconfig string) {
	w, o := u.stdout, u.o
	fmt.Fprintln(w, "Bindery is up.")
	fmt.Fprintf(w, "  REST API:        http://%s/api/v1\n", catalogAddr)
	fmt.Fprintf(w, "  Kubernetes API:  %s (kubectl --kubeconfig %s get serviceinstances -A)\n", apiURL, kubeconfig)
	fmt.Fprintf(w, "  admin token:     %s\n", u.creds.AdminToken)
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

// validateWebhook checks --webhook-listen, unless it is empty.
func (o *upOptions) validateWebhook() error {
	if o.webhook.Listen == "" {
		return nil
	}
	o.webhook.Controller = true
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

// startEmbedded starts the PostgreSQL kept in the data directory.
func startEmbedded(ctx context.Context, log *slog.Logger, dir string) (*pgserver.Server, error) {
	log.Info("starting the embedded PostgreSQL", "dir", filepath.Join(dir, "pg"))
	return pgserver.Start(ctx, filepath.Join(dir, "pg"), pgserver.Options{})
}

// credentialsFile is where, in the data directory, the generated
// credentials are kept.
const credentialsFile = "credentials.json"

// completeFromDataDir fills what the flags leave out from the data
// directory, generating it the first time: the encryption key and the
// broker's credentials. It returns the generated credentials.
func (o *upOptions) completeFromDataDir(dir string) (generated, error) {
	var err error
	if o.keys.encryptionKey == "" {
		if o.keys.encryptionKey, err = readOrCreate(filepath.Join(dir, "encryption.key"), keyring.Generate); err != nil {
			return generated{}, err
		}
	}
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

// listenAll opens every address, or none.
func listenAll(addrs ...string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, a := range addrs {
		l, err := serve.Listen(a)
		if err != nil {
			closeAll(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
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

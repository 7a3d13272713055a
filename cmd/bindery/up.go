package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
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

// runUp is `bindery up`: everything on one machine, state in --data-dir.
func runUp(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "up")
	var db dbOptions
	var bo brokerOptions
	var co catalogOptions
	var ko controllerOptions
	db.addFlags(fs)
	bo.addFlags(fs, "broker-listen", "127.0.0.1:8081")
	co.addFlags(fs, "catalog-listen", "127.0.0.1:8080")
	ko.addFlags(fs, "controller-listen", "127.0.0.1:8082")
	apiListen := fs.String("apiserver-listen", "127.0.0.1:8443", "HOST:PORT of the servicecatalog.k8s.io API (HTTPS; kubeconfig in the data directory)")
	dataDir := fs.String("data-dir", ".bindery", "where Bindery keeps its state: PostgreSQL, encryption key, generated credentials")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}

	if db.url == "" {
		log.Info("starting the embedded PostgreSQL", "dir", filepath.Join(dir, "pg"))
		srv, err := pgserver.Start(ctx, filepath.Join(dir, "pg"), pgserver.Options{})
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				log.Warn("stop the embedded PostgreSQL", "error", err)
			}
		}()
		if db.url, err = srv.EnsureDatabase(ctx, "bindery"); err != nil {
			return err
		}
	}
	if bo.encryptionKey == "" {
		if bo.encryptionKey, err = readOrCreate(filepath.Join(dir, "encryption.key"), keyring.Generate); err != nil {
			return err
		}
	}
	co.encryptionKey, ko.encryptionKey = bo.encryptionKey, bo.encryptionKey
	credsPath := filepath.Join(dir, "credentials.json")
	creds, err := loadGenerated(credsPath)
	if err != nil {
		return err
	}
	if bo.username == "" && bo.password == "" && bo.token == "" {
		bo.username, bo.password, bo.token = creds.BrokerUsername, creds.BrokerPassword, creds.BrokerToken
	}
	if err := errors.Join(bo.complete(&db), co.complete()); err != nil {
		return err
	}

	pool, err := db.open(ctx, log, migrations.Schemas()...)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := newCatalogStore(pool, co.encryptionKey, log)
	if err != nil {
		return err
	}
	if creds.AdminToken, err = ensureAdminToken(ctx, store, creds.AdminToken); err != nil {
		return err
	}
	if err := saveGenerated(credsPath, creds); err != nil {
		return err
	}
	brokerL, err := serve.Listen(bo.listen)
	if err != nil {
		return err
	}
	catalogL, err := serve.Listen(co.listen)
	if err != nil {
		brokerL.Close()
		return err
	}
	controllerL, err := serve.Listen(ko.listen)
	if err != nil {
		brokerL.Close()
		catalogL.Close()
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	kube, err := withCluster(gctx, store, &ko)
	if err != nil {
		brokerL.Close()
		catalogL.Close()
		controllerL.Close()
		return err
	}
	g.Go(func() error { return runBroker(gctx, log, pool, &bo, brokerL) })
	g.Go(func() error { return runCatalog(gctx, log, store, &co, catalogL) })
	g.Go(func() error { return runController(gctx, log, store, kube, &ko, controllerL) })
	klog.SetSlogLogger(log.With("component", "apiserver"))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	apiReady := make(chan string, 1)
	g.Go(func() error {
		return apiserver.Run(gctx, &apiserver.Options{
			Listen: *apiListen, DataDir: filepath.Join(dir, "apiserver"), Kubeconfig: kubeconfig,
		}, store, log.With("component", "apiserver"), func(c *apiserver.Config) { apiReady <- c.Server })
	})
	var apiURL string
	select {
	case apiURL = <-apiReady:
	case <-gctx.Done():
		return g.Wait()
	}
	g.Go(func() error {
		// The built-in broker is the catalog's first broker; a failure to
		// reach it shows in its status and is retried by the relister.
		err := registerBuiltin(gctx, store, "http://"+brokerL.Addr().String(), bo.username, bo.password)
		if err != nil && gctx.Err() == nil {
			log.Warn("register the built-in broker", "error", err)
		}
		return nil
	})

	// The one place credentials are shown: stdout, never the log.
	w := e.stdout
	fmt.Fprintln(w, "Bindery is up.")
	fmt.Fprintf(w, "  REST API:        http://%s/api/v1\n", catalogL.Addr())
	fmt.Fprintf(w, "  Kubernetes API:  %s (kubectl --kubeconfig %s get serviceinstances -A)\n", apiURL, kubeconfig)
	fmt.Fprintf(w, "  admin token:     %s\n", creds.AdminToken)
	fmt.Fprintf(w, "  OSB broker:      http://%s/v2/catalog\n", brokerL.Addr())
	fmt.Fprintf(w, "  broker username: %s\n", bo.username)
	fmt.Fprintf(w, "  broker password: %s\n", bo.password)
	if bo.token != "" {
		fmt.Fprintf(w, "  broker token:    %s\n", bo.token)
	}
	fmt.Fprintf(w, "  database:        %s\n", redact(db.url))
	fmt.Fprintf(w, "  data directory:  %s\n", dir)
	fmt.Fprintln(w, "Press Ctrl-C to stop.")

	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// registerBuiltin registers (or points again) the catalog's broker named
// "bindery" at this process's broker, and fetches its catalogue.
func registerBuiltin(ctx context.Context, store *catalog.Store, url, username, password string) error {
	auth := &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: username, Password: password}}
	b, err := store.GetBroker(ctx, builtinBroker)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		b = &catalog.Broker{Spec: catalog.BrokerSpec{URL: url}}
		b.Name = builtinBroker
		if b, err = store.CreateBroker(ctx, b, auth); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if b, err = store.UpdateBroker(ctx, b.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
			b.Spec.URL = url
			return auth, nil
		}); err != nil {
			return err
		}
	}
	_, err = store.Relist(ctx, b.ID)
	return err
}

// ensureAdminToken returns token if the catalog knows it, or a new admin
// token.
func ensureAdminToken(ctx context.Context, store *catalog.Store, token string) (string, error) {
	if token != "" {
		if t, err := store.LookupToken(ctx, token); err == nil && t.Role == catalog.RoleAdmin && t.AllNamespaces() {
			return token, nil
		}
	}
	return store.CreateToken(ctx, catalog.RoleAdmin)
}

// readOrCreate returns the content of path, creating it (mode 0600) with
// make() the first time.
func readOrCreate(path string, make func() string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
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
	return os.WriteFile(path, append(b, '\n'), 0o600)
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

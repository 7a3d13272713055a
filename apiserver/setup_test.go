package apiserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

func TestMain(m *testing.M) {
	// k8s.io/apiserver logs through klog; the tests' own logs are enough.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	pgtest.Main(m)
}

// bundle is what a test gets: the catalog, the server's kubeconfig and a
// typed client that reaches the server with it.
type bundle struct {
	t          testing.TB
	store      *catalog.Store
	client     versioned.Interface
	kubeconfig string
	dir        string
	broker     *catalog.Broker
	fake       *osbtest.Broker
}

// setup starts the API server on a fresh database with a fake broker
// registered (its class fake-service with plans sync, async, …).
func setup(t testing.TB) *bundle {
	t.Helper()
	store := apiserver.NewTestStore(t)
	fake, b := apiserver.RegisterFakeBroker(t, store)
	bb := serve(t, store, b)
	bb.fake = fake
	return bb
}

// serve starts an API server on store (another replica when store's
// database already has one), with its options changed by each of set.
func serve(t testing.TB, store *catalog.Store, b *catalog.Broker, set ...func(*apiserver.Options)) *bundle {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := &apiserver.Options{Listener: l, DataDir: filepath.Join(dir, "apiserver"), BookmarkInterval: 100 * time.Millisecond}
	for _, f := range set {
		f(opts)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runServer(t, opts, store, log)
	kubeconfig := filepath.Join(opts.DataDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's default 5 requests a second would measure its limiter.
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Ready once discovery answers.
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		_, err := client.Discovery().ServerResourcesForGroupVersion("servicecatalog.k8s.io/v1beta1")
		return err
	})
	return &bundle{t: t, store: store, client: client, kubeconfig: kubeconfig, dir: dir, broker: b}
}

// runServer runs the API server until t ends and returns its config once
// it serves.
func runServer(t testing.TB, opts *apiserver.Options, store *catalog.Store, log *slog.Logger) *apiserver.Config {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *apiserver.Config, 1)
	go func() {
		done <- apiserver.Run(ctx, opts, store, log, func(c *apiserver.Config) { ready <- c })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	select {
	case c := <-ready:
		return c
	case err := <-done:
		t.Fatalf("server: %v", err)
		return nil
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// kubectl runs bin/kubectl against the server, with stdin (may be nil).
func (b *bundle) kubectl(stdin []byte, args ...string) (string, error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return kubetest.Kubectl(ctx, b.dir, b.kubeconfig, stdin, args...)
}

func (b *bundle) mustKubectl(stdin []byte, args ...string) string {
	b.t.Helper()
	out, err := b.kubectl(stdin, args...)
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

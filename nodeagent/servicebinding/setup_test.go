package servicebinding_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// bundle is what a test against the real control plane needs.
type bundle struct {
	cluster *kubetest.Cluster
	kube    kubernetes.Interface
	c       client.Client
	ns      string
	// webhookURL is the loopback URL the API server calls.
	webhookURL string
	caBundle   []byte
	// certDir holds the webhook's tls.crt and tls.key.
	certDir string
	// stop ends the webhook and controller; start runs them again.
	stop  func()
	start func()
	// logs holds what the webhook and controller logged (warnings and
	// errors, controller-runtime's and its informers' among them).
	logs *logRecord
}

// logRecord keeps log lines for a test to read.
type logRecord struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecord) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, string(p))
	return len(p), nil
}

// since returns the lines logged after the first n, and how many there are.
func (r *logRecord) since(n int) ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines[n:]...), len(r.lines)
}

// setup starts kube-apiserver and kube-controller-manager (so Deployments
// make ReplicaSets and Pods objects; no node, so the Pods stay Pending),
// installs the CRDs from deploy/servicebinding/crd, runs the webhook and
// controller on a loopback port and registers the webhook at its URL.
func setup(t testing.TB, failurePolicy admissionregistrationv1.FailurePolicyType) *bundle {
	return setupAs(t, failurePolicy, "")
}

// webhookUser is the identity the webhook runs as in setupAs, with only
// the rights deploy/servicebinding/rbac.yaml gives its ServiceAccount.
const webhookUser = "bindery-webhook"

// setupAs is setup with the webhook and controller running as user, with
// the RBAC of deploy/servicebinding bound to it; as the cluster's admin
// when user is empty.
func setupAs(t testing.TB, failurePolicy admissionregistrationv1.FailurePolicyType, user string) *bundle {
	t.Helper()
	return setupWith(t, failurePolicy, user, nil)
}

// clusterWithCRDs starts a cluster of its own with opts, installs the
// CRDs, and returns it and a client of it.
func clusterWithCRDs(t testing.TB, opts ...kubetest.Option) (*kubetest.Cluster, client.Client) {
	t.Helper()
	cluster := kubetest.Start(t, opts...)
	scheme, err := servicebinding.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	installCRDs(t, c)
	return cluster, c
}

// setupWith is setupAs with tweak, when not nil, changing the webhook's
// options and cluster configuration before they run.
func setupWith(t testing.TB, failurePolicy admissionregistrationv1.FailurePolicyType, user string, tweak func(*servicebinding.Options, *rest.Config)) *bundle {
	t.Helper()
	cluster, c := clusterWithCRDs(t, kubetest.WithUser(webhookUser),
		kubetest.WithControllerManager("deployment-controller", "replicaset-controller", "job-controller", "clusterrole-aggregation-controller"))
	ctx := t.Context()
	runAs := cluster.Config()
	if user != "" {
		installRBAC(t, c, user)
		runAs = cluster.ConfigFor(user)
	}

	dir := t.TempDir()
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	o := &servicebinding.Options{Listen: "127.0.0.1:" + strconv.Itoa(port), CertDir: dir, Controller: true, KubeTimeout: kubecall.DefaultTimeout}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(o, runAs)
	}
	b := &bundle{
		cluster: cluster, kube: cluster.Client(t), c: c,
		webhookURL: "https://127.0.0.1:" + strconv.Itoa(port) + servicebinding.MutatePath,
		caBundle:   cert,
		certDir:    dir,
	}
	b.logs = &logRecord{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, b.logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var cancel context.CancelFunc
	var done chan error
	b.start = func() {
		var runCtx context.Context
		runCtx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		done = make(chan error, 1)
		go func() { done <- servicebinding.RunWithConfig(runCtx, log, runAs, o) }()
		waitListening(t, o.Listen, done)
	}
	b.stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("webhook: %v", err)
		}
		cancel = nil
	}
	b.start()
	t.Cleanup(func() {
		if cancel != nil {
			b.stop()
		}
	})
	registerWebhook(t, b, failurePolicy)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	b.ns = ns.Name
	return b
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func installCRDs(t testing.TB, c client.Client) {
	t.Helper()
	files, err := filepath.Glob("../../deploy/servicebinding/crd/*.yaml")
	if err != nil || len(files) != 2 {
		t.Fatalf("CRDs: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.Create(t.Context(), &crd); err != nil {
			t.Fatalf("create %s: %v", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(&crd), &crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}

// installRBAC creates the ClusterRoles and ClusterRoleBinding of
// deploy/servicebinding/rbac.yaml, bound to user instead of the
// ServiceAccount, and waits for the aggregated ClusterRole to be filled.
func installRBAC(t testing.TB, c client.Client, user string) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/servicebinding/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "ClusterRoleBinding" {
			u.Object["subjects"] = []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}}
		}
		if err := c.Create(t.Context(), &u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	eventually(t, "aggregated ClusterRole filled", func(ctx context.Context) error {
		var role rbacv1.ClusterRole
		if err := c.Get(ctx, client.ObjectKey{Name: "bindery-servicebinding"}, &role); err != nil {
			return err
		}
		if len(role.Rules) < 10 {
			return fmt.Errorf("%d rules", len(role.Rules))
		}
		return nil
	})
}

// The webhooks of deploy/servicebinding/webhook.yaml.
const (
	projectionWebhook = "projection.servicebinding.bindery.dev"
	egressWebhook     = "egress.servicebinding.bindery.dev"
)

// registerWebhook registers the webhooks as deploy/servicebinding does,
// except that the API server calls a loopback URL, and that the projection
// webhook has failurePolicy and no namespace selector.
func registerWebhook(t testing.TB, b *bundle, failurePolicy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/servicebinding/webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		url := b.webhookURL
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: b.caBundle}
		if w.Name == projectionWebhook {
			w.FailurePolicy = &failurePolicy
			// Every namespace of the test cluster is in scope.
			w.NamespaceSelector = nil
		}
	}
	if err := b.c.Create(t.Context(), &cfg); err != nil {
		t.Fatal(err)
	}
	// The API server picks up a new webhook configuration within a moment;
	// wait for it to call the webhook (a dry-run Pod comes back projected
	// once both the configuration and a binding are seen, tested by the
	// scenarios themselves).
	time.Sleep(500 * time.Millisecond)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(t testing.TB, addr string, done chan error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("webhook ended: %w", err)
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("webhook at %s: %v", addr, err)
	}
}

// eventually polls f until it returns nil or the time is up.
func eventually(t testing.TB, what string, f func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

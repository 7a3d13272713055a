package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	c := Start(t, WithUser("carol", "auditors"))
	ctx := t.Context()
	admin := c.Client(t)
	const ns = "kubetest"

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		StringData: map[string]string{"password": "s3cret"},
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	got, err := admin.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get secret: %v", err)
	}
	if string(got.Data["password"]) != "s3cret" {
		t.Errorf("secret data = %q, want %q", got.Data, "s3cret")
	}

	t.Run("rbac", func(t *testing.T) {
		alice := clientFor(t, c, Alice)
		if _, err := alice.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice without rights: get secret err = %v, want 403 Forbidden", err)
		}
		grantSecretReader(t, admin, ns, rbacv1.Subject{Kind: rbacv1.UserKind, Name: Alice})
		// RBAC reads bindings from an informer: allow it a moment to see the new one.
		eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
			_, err := alice.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
			return err
		})
		if _, err := clientFor(t, c, Bob).CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("bob: get secret err = %v, want 403 Forbidden", err)
		}
	})

	t.Run("groups", func(t *testing.T) {
		grantSecretReader(t, admin, ns, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "auditors"})
		carol := clientFor(t, c, "carol")
		eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
			_, err := carol.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		})
	})

	t.Run("kubectl", func(t *testing.T) {
		out, err := c.Kubectl(t, "get", "secrets", "-n", ns, "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "secret/db" {
			t.Errorf("kubectl get secrets = %q, want secret/db", out)
		}
		manifest := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + "}\ndata: {a: b}\n")
		if _, err := c.KubectlAs(t, Admin, manifest, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.KubectlAs(t, Bob, nil, "get", "configmaps", "-n", ns); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("kubectl as bob: err = %v, want Forbidden", err)
		}
	})

	t.Run("pods stay pending", func(t *testing.T) {
		// Admission without the ServiceAccount plugin lets a Pod be created
		// although no controller made the default ServiceAccount.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
		}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod: %v", err)
		}
	})
}

// TestControllerManager checks that the clusterrole-aggregation controller
// runs: a ClusterRole labelled aggregate-to-view ends up in the built-in
// "view" role, and so in the rights of a user bound to "view".
func TestControllerManager(t *testing.T) {
	t.Parallel()
	c := Start(t, WithControllerManager())
	ctx := t.Context()
	admin := c.Client(t)
	const ns = "kubetest"

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-view", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: Alice}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role binding: %v", err)
	}

	// kubectl auth can-i resolves "widgets.example.com" through discovery;
	// for a resource the server does not serve it warns and checks resource
	// "widgets.example.com" in the core group instead, which no rule grants.
	if _, err := c.KubectlAs(t, Admin, []byte(widgetCRD), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.example.com"); err != nil {
		t.Fatal(err)
	}

	rule := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list"}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "widgets-view",
			Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"},
		},
		Rules: []rbacv1.PolicyRule{rule},
	}
	created := time.Now()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role: %v", err)
	}
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		view, err := admin.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, rule) }) {
			return fmt.Errorf("view has %d rules, none of them %v", len(view.Rules), rule)
		}
		return nil
	})
	t.Logf("kube-controller-manager set up its controllers %s after kube-apiserver was ready; the new rule was in view %s after the ClusterRole was created",
		c.controllerManagerTime.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))

	canI := func(user, verb string) (string, error) {
		out, err := c.KubectlAs(t, user, nil, "auth", "can-i", verb, "widgets.example.com", "-n", ns)
		return strings.TrimSpace(out), err
	}
	// The authorizer reads roles from an informer: allow it a moment to see
	// the aggregated rule.
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if out, err := canI(Alice, "list"); out != "yes" {
			return fmt.Errorf("alice: can-i list widgets = %q, %v; want yes", out, err)
		}
		return nil
	})
	if _, err := c.KubectlAs(t, Alice, nil, "get", "widgets.example.com", "-n", ns); err != nil {
		t.Errorf("alice: %v", err)
	}
	// `auth can-i` exits 1 when the answer is no.
	for _, tc := range []struct{ user, verb string }{{Alice, "delete"}, {Bob, "list"}} {
		if out, err := canI(tc.user, tc.verb); out != "no" || err == nil {
			t.Errorf("%s: can-i %s widgets = %q, %v; want no", tc.user, tc.verb, out, err)
		}
	}
}

// widgetCRD serves widgets.example.com, the made-up resource of TestControllerManager.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

func TestMissingBinaries(t *testing.T) {
	t.Setenv(EnvBin, t.TempDir())
	_, err := start(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make bin/kube-apiserver") {
		t.Fatalf("start without binaries: err = %v, want one naming make bin/kube-apiserver", err)
	}
}

// TestControllerManagerBinary checks that kube-controller-manager is required
// only by clusters that run it.
func TestControllerManagerBinary(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvBin, dir)
	if _, err := binDir(false, false); err != nil {
		t.Errorf("without the controller manager: %v", err)
	}
	_, err := binDir(true, false)
	if err == nil || !strings.Contains(err.Error(), "kube-controller-manager is missing") || !strings.Contains(err.Error(), "make bin/kube-apiserver") {
		t.Errorf("with the controller manager: err = %v, want one naming kube-controller-manager and make bin/kube-apiserver", err)
	}
}

func TestUnknownUserPanics(t *testing.T) {
	c := &Cluster{tokens: map[string]string{Admin: "x"}}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "WithUser") {
			t.Errorf("recover() = %v, want a panic pointing at WithUser", r)
		}
	}()
	c.ConfigFor("mallory")
}

// BenchmarkStart measures start-up to ready, and the stop that follows,
// reported apart as ready-s and stop-s, without and with
// kube-controller-manager.
func BenchmarkStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"apiserver", nil},
		{"controller-manager", []Option{WithControllerManager()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ready, stop time.Duration
			for b.Loop() {
				c, err := start(b.Context(), b.TempDir(), bc.opts...)
				if c != nil {
					ready += c.StartupTime
					began := time.Now()
					if err := c.stop(); err != nil {
						b.Error(err)
					}
					stop += time.Since(began)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(ready.Seconds()/float64(b.N), "ready-s")
			b.ReportMetric(stop.Seconds()/float64(b.N), "stop-s")
		})
	}
}

func clientFor(t *testing.T, c *Cluster, user string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.ConfigFor(user))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func grantSecretReader(t *testing.T, admin kubernetes.Interface, ns string, subject rbacv1.Subject) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "secret-reader-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role binding: %v", err)
	}
}

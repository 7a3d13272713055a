package kubetest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
		waitFor(t, func() error {
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
		waitFor(t, func() error {
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

func TestMissingBinaries(t *testing.T) {
	t.Setenv(EnvBin, t.TempDir())
	_, err := start(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make bin/kube-apiserver") {
		t.Fatalf("start without binaries: err = %v, want one naming make bin/kube-apiserver", err)
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
// reported apart as ready-s and stop-s.
func BenchmarkStart(b *testing.B) {
	var ready, stop time.Duration
	for b.Loop() {
		c, err := start(b.Context(), b.TempDir())
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

func waitFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

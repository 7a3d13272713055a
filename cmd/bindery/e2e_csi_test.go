package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/nodeagent/csi"
)

// csiStack is what csi.bindery.dev needs around it, all real: a
// kube-apiserver (TokenReview, RBAC), `bindery up` with Bindery's broker
// creating databases in a target PostgreSQL, and `bindery serve apiserver`
// delegating to the cluster, which the driver reaches directly.
type csiStack struct {
	cluster *kubetest.Cluster
	kube    kubernetes.Interface
	sc      versioned.Interface // the cluster's admin, straight to Bindery's API server
	up      *proc
	api     *proc
	apiURL  string
	apiCA   string // file
}

// startCSIStack starts the stack on cluster. apiHost is the address the
// API server listens on (the node's, when kube-apiserver must reach it
// through the aggregation layer), targetURL Bindery's broker's target.
func startCSIStack(t testing.TB, cluster *kubetest.Cluster, apiHost string, env []string, upArgs ...string) *csiStack {
	t.Helper()
	s := &csiStack{cluster: cluster, kube: cluster.Client(t)}
	dbURL := pgtest.New(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	s.up, _ = upWithCluster(t, cluster, dataDir, freeTCPPort(t),
		append([]string{"DATABASE_URL=" + dbURL}, env...), upArgs...)
	// The API server opens the credentials that up's engine sealed.
	key, err := os.ReadFile(filepath.Join(dataDir, "encryption.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(apiHost, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	apiDir := t.TempDir()
	s.api = start(t, []string{"DATABASE_URL=" + dbURL, "KUBECONFIG=" + cluster.Kubeconfig(), "BINDERY_ENCRYPTION_KEY=" + strings.TrimSpace(string(key))}, "serve", "apiserver",
		"--listen", addr, "--data-dir", apiDir, "--tls-hosts", "bindery-apiserver.bindery-system.svc")
	s.apiURL = servingURL(t, s.api, "serving the Kubernetes API behind the cluster's aggregation layer")
	s.apiCA = filepath.Join(apiDir, "ca.crt")
	ca, err := os.ReadFile(s.apiCA)
	if err != nil {
		t.Fatal(err)
	}
	s.sc, err = versioned.NewForConfig(&rest.Config{Host: s.apiURL, BearerToken: cluster.Token(kubetest.Admin), TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// targetPostgres starts the target PostgreSQL of Bindery's broker, also
// listening on listen, and returns its URL with host as the address the
// bindings name.
func targetPostgres(t testing.TB, host netip.Addr, listen ...netip.Addr) (*pgserver.Server, string) {
	t.Helper()
	base, err := os.MkdirTemp("", "bindery-target-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	target, err := pgserver.Start(t.Context(), filepath.Join(base, "pg"), pgserver.Options{
		Fast: true, Listen: listen, Allow: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Stop() })
	u, err := url.Parse(target.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host.String(), strconv.Itoa(target.Port()))
	return target, u.String()
}

// namespace creates a namespace with a PostgreSQL instance "db" of
// Bindery's broker, and waits until the API server knows the namespace.
func (s *csiStack) namespace(t testing.TB, ns string) {
	t.Helper()
	if _, err := s.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		_, err := s.sc.ServicecatalogV1beta1().ServiceInstances(ns).Create(ctx, &v1beta1.ServiceInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{
				ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small"}},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// bind creates a binding of db that asks for no Secret (rotating pred when
// not empty) and waits until it is Ready.
func (s *csiStack) bind(t testing.TB, ns, name, pred string) *v1beta1.ServiceBinding {
	t.Helper()
	b := &v1beta1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{catalog.NoSecretAnnotation: "true"}},
		Spec:       v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}},
	}
	if pred != "" {
		b.Spec.PredecessorBindingRef = &v1beta1.LocalObjectReference{Name: pred}
	}
	api := s.sc.ServicecatalogV1beta1().ServiceBindings(ns)
	if _, err := api.Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out *v1beta1.ServiceBinding
	eventually.Succeeds(t, 3*time.Minute, func(ctx context.Context) error {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == v1beta1.ServiceBindingConditionReady && c.Status == v1beta1.ConditionTrue {
				out = got
				return nil
			}
		}
		return fmt.Errorf("binding %s/%s not Ready: %+v\nup:\n%s", ns, name, got.Status.Conditions, tail(s.up.stderr.String(), 4000))
	})
	return out
}

// serviceAccount creates a service account, with the right to read the
// credentials subresource of every binding of its namespace when grant.
func (s *csiStack) serviceAccount(t testing.TB, ns, name string, grant bool) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !grant {
		return
	}
	// The role deploy/bindery ships, bound in the namespace.
	if _, err := s.cluster.Kubectl(t, "apply", "-f", filepath.Join("..", "..", "deploy", "bindery", "base", "csi-roles.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "servicebinding-credentials-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// token is a token of the service account for Bindery's audience, as the
// kubelet gets one for the driver.
func (s *csiStack) token(t testing.TB, ns, sa string) string {
	t.Helper()
	tr, err := s.kube.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{csi.DefaultAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// startDriver runs `bindery serve nodeagent --csi` with the kubelet's root
// directory kubeletDir, and waits for its CSI socket.
func (s *csiStack) startDriver(t testing.TB, kubeletDir, nodeName string, extra ...string) *proc {
	t.Helper()
	p := start(t, nil, append([]string{"serve", "nodeagent", "--csi", "--node-name", nodeName, "--csi-kubelet-dir", kubeletDir,
		"--csi-apiserver", s.apiURL, "--csi-apiserver-ca", s.apiCA, "--listen", "127.0.0.1:0"}, extra...)...)
	sock := filepath.Join(kubeletDir, "plugins", csi.Name, "csi.sock")
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		p.failIfExited(t)
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err != nil {
			return fmt.Errorf("%v\n%s", err, p.stderr.String())
		}
		return c.Close()
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// mountsAt counts the mounts at path in this mount namespace.
func mountsAt(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

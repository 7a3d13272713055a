package deploy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/ociimage"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/pki"
	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/bindery-dev/bindery/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// image is the reference Bindery's image is imported as on the test node.
// Not :latest, so that the kubelet never tries to pull it.
const image = "bindery.test/bindery:e2e"

// TestInstallOnNode installs deploy/ as an operator would (`kubectl apply -k`,
// through an overlay that sets what this node needs) on a real node:
// Bindery's own image, built here without a container engine and imported
// into the node's containerd; the aggregated API server, the engine and
// the webhook, two replicas each, and the node agent DaemonSet, all
// running as Pods from the manifests, Ready, under the namespaces'
// enforced Pod Security levels. Then a ClusterServiceBroker, a
// ServiceInstance and a ServiceBinding applied through kube-apiserver's
// aggregation layer become Ready, the binding's Secret holds credentials
// that open the database, and the broker was asked once for each, though
// two engines ran. The node agent's device plugins register with the
// kubelet, and its init container chains bindery-cni into the node's CNI
// configuration, through which a Pod created afterwards starts.
//
// What the overlay changes, and why: the image (no registry); the
// variables that point client-go's in-cluster configuration at
// kube-apiserver on the node's address (no kube-proxy runs, so the
// kubernetes Service's ClusterIP leads nowhere); the node agent's CNI
// directories (the node's own) and managed ranges (the manifests'
// placeholder, 198.18.0.0/15, holds this node's Pod and node addresses).
// PostgreSQL and the broker run in this process, reached from the Pods
// through relays on the node's address. The NetworkPolicies are applied
// but not enforced: the node's bridge plugin does not implement them.
func TestInstallOnNode(t *testing.T) {
	in := startInstall(t)
	c, cs, ctx := in.c, in.cs, t.Context()
	overlay := writeOverlay(t, in.n)
	built, _ := kubectl(ctx, t, c, nil, "kustomize", overlay)
	var namespaces []byte
	for _, o := range objects(t, "overlay", []byte(built)) {
		if o.GetKind() == "Namespace" {
			b, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			namespaces = append(append(namespaces, b...), '\n')
		}
	}
	kubectl(ctx, t, c, namespaces, "apply", "-f", "-")
	in.createSecrets(t)

	began := time.Now()
	kubectl(ctx, t, c, nil, "apply", "-k", overlay)
	caBundle := base64.StdEncoding.EncodeToString(in.ca.CertPEM())
	kubectl(ctx, t, c, nil, "patch", "apiservice", "v1beta1.servicecatalog.k8s.io", "--type=merge",
		"-p", `{"spec":{"caBundle":"`+caBundle+`"}}`)
	// Every webhook of the configuration calls the same server.
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "bindery-servicebinding", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for i := range mwc.Webhooks {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/webhooks/%d/clientConfig/caBundle","value":"%s"}`, i, caBundle))
	}
	kubectl(ctx, t, c, nil, "patch", "mutatingwebhookconfiguration", "bindery-servicebinding", "--type=json",
		"-p", "["+strings.Join(ops, ",")+"]")
	in.waitReady(t, began, "kubectl apply")
	secret := in.checkInstance(t)

	// servicebinding.io: the webhook and its controller project the
	// binding's Secret into a Deployment's Pods.
	kubectl(ctx, t, c, []byte(`apiVersion: servicebinding.io/v1
kind: ServiceBinding
metadata:
  name: web-db
  namespace: shop
spec:
  service: {apiVersion: servicecatalog.k8s.io/v1beta1, kind: ServiceBinding, name: app}
  workload: {apiVersion: apps/v1, kind: Deployment, name: web}
`), "apply", "-f", "-")
	web := kubetest.BusyboxPod("", "exec sleep 3600")
	web.Labels = map[string]string{"app": "web"}
	if _, err := cs.AppsV1().Deployments("shop").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: web.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: web.ObjectMeta, Spec: web.Spec},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectl(ctx, t, c, nil, "wait", "--for=condition=Ready", "--timeout=120s", "-n", "shop", "servicebindings.servicebinding.io/web-db")
	var projected string
	waitFor(t, 2*time.Minute, "a Pod of web with the binding projected", func(ctx context.Context) error {
		pods, err := cs.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "SERVICE_BINDING_ROOT" {
					projected = p.Name
					return nil
				}
			}
		}
		return fmt.Errorf("no Running Pod of web has SERVICE_BINDING_ROOT among %d", len(pods.Items))
	})
	t.Logf("servicebinding.io projected the Secret into %s", projected)
	out, err := c.Kubectl(t, "exec", "-n", "shop", projected, "--", "sh", "-c", `cat "$SERVICE_BINDING_ROOT/web-db/username"`)
	if err != nil || out != string(secret.Data["username"]) {
		t.Errorf("the projected username in %s = %q, %v; want %q", projected, out, err, secret.Data["username"])
	}

	// The node agent: device plugins registered with the kubelet for the
	// devices this host has, and bindery-cni in the node's chain.
	var resources []corev1.ResourceName
	for path, name := range map[string]corev1.ResourceName{"/dev/kvm": "bindery.dev/kvm", "/dev/fuse": "bindery.dev/fuse", "/dev/net/tun": "bindery.dev/tun"} {
		if _, err := os.Stat(path); err == nil {
			resources = append(resources, name)
		}
	}
	waitFor(t, time.Minute, "the node to advertise the node agent's devices", func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, in.n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, r := range resources {
			if q := node.Status.Allocatable[r]; q.Value() != 110 {
				return fmt.Errorf("allocatable %s = %s, want 110 (allocatable: %v)", r, q.String(), node.Status.Allocatable)
			}
		}
		return nil
	})
	in.checkChained(t)
	pod := kubetest.BusyboxPod("after-cni", "exec sleep 3600")
	if _, err := cs.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitPodRunning(t, cs, "shop", "after-cni")
}

// TestHelmInstallOnNode installs the chart in deploy/helm/bindery with
// `helm install` on a real node, set up as TestInstallOnNode sets up its
// own, and makes its main checks: the aggregated API server, the engine,
// the webhook and the node agent Ready, the APIService Available, and a
// ServiceInstance and ServiceBinding applied through the aggregation
// layer Ready with a Secret that opens the database. What the overlay
// changes there, values change here; the serving certificates' CA comes in
// as caBundle. The operator's Secrets are made first, in a namespace made
// with Helm's ownership metadata so that the release adopts it
// (docs/install.md). Since the chart renders what the manifests hold
// (TestHelmMatchesKustomize), projection and the node agent's devices are
// left to TestInstallOnNode.
func TestHelmInstallOnNode(t *testing.T) {
	helm := helmBin(t, "helm")
	in := startInstall(t)
	ctx := t.Context()
	for _, ns := range []string{"bindery-system", "bindery-node"} {
		kubectl(ctx, t, in.c, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: `+ns+`
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: bindery, meta.helm.sh/release-namespace: bindery-system}
`), "apply", "-f", "-")
	}
	in.createSecrets(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, helmNodeValues(t, in), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, helm, "install", "bindery", chart, "--namespace", "bindery-system",
		"--kubeconfig", in.c.Kubeconfig(), "-f", values)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	in.waitReady(t, began, "helm install")
	in.checkInstance(t)
	in.checkChained(t)
}

// helmNodeValues are the chart's values for the test node: what
// writeOverlay changes for TestInstallOnNode, and the CA of the serving
// certificates.
func helmNodeValues(t *testing.T, in *install) []byte {
	t.Helper()
	repo, tag, _ := strings.Cut(image, ":")
	var env []map[string]string
	for _, k := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		env = append(env, map[string]string{"name": k, "value": in.n.InClusterEnv()[k]})
	}
	b, err := yaml.Marshal(map[string]any{
		"image":    map[string]any{"repository": repo, "tag": tag},
		"extraEnv": env,
		"caBundle": base64.StdEncoding.EncodeToString(in.ca.CertPEM()),
		"nodeAgent": map[string]any{"cni": map[string]any{
			"binDir": in.n.CNIBinDir, "confDir": in.n.CNIConfDir,
			// TEST-NET-3 (RFC 5737): nothing here uses it.
			"managedCIDRs": []string{"203.0.113.0/24"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// install is what TestInstallOnNode and TestHelmInstallOnNode share: the
// node with Bindery's image, and what the operator provides outside the
// manifests (PostgreSQL, a broker, the serving certificates' CA).
type install struct {
	c          *kubetest.Cluster
	n          *kubetest.Node
	cs         kubernetes.Interface
	ca         *pki.KeyPair
	podDB      string // the database's URL, as the Pods reach it
	keys       string
	brokerUser string
	brokerPass string
	broker     *countingProxy
}

// startInstall builds Bindery's image, starts a node with it, PostgreSQL
// and a broker reached from Pods at the node's address, and a CA.
func startInstall(t *testing.T) *install {
	t.Helper()
	roottest.Require(t, "a real node (containerd, kubelet, cgroups)")
	ctx := t.Context()

	// The image first: the node is shared with other tests through a
	// lock, held from Start on.
	began := time.Now()
	tarball := buildImage(t)
	t.Logf("image %s built in %s", image, time.Since(began).Round(time.Millisecond))

	c := kubetest.Start(t, kubetest.WithInClusterAPI())
	in := &install{c: c, n: c.Node(), cs: c.Client(t), keys: keyring.Generate(), brokerUser: "osb-user", brokerPass: "osb-password-1234"}
	began = time.Now()
	if err := in.n.ImportImage(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("image imported in %s", time.Since(began).Round(time.Millisecond))

	in.podDB = relayURL(t, kubetest.NodeIP, pgtest.New(t))
	brokerPool := pgtest.Pool(t)
	if err := migrations.Up(ctx, brokerPool, migrations.Broker); err != nil {
		t.Fatal(err)
	}
	brokerKeys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	in.broker = newCountingProxy(t, kubetest.NodeIP, brokertest.Start(t, brokerPool, brokerKeys, in.brokerUser, in.brokerPass))
	if in.ca, err = pki.NewCA("bindery-test-ca", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, c, in.cs, "bindery-system", "bindery-node")
		}
	})
	return in
}

// createSecrets creates what the operator creates in bindery-system
// (deploy/bindery/README.md): the database and encryption Secrets,
// serving certificates, and the broker's credentials.
func (in *install) createSecrets(t *testing.T) {
	t.Helper()
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "bindery-database"}, StringData: map[string]string{"url": in.podDB}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bindery-encryption"}, StringData: map[string]string{"keys": in.keys}},
		tlsSecret(t, in.ca, "bindery-apiserver-tls", "bindery-apiserver.bindery-system.svc"),
		tlsSecret(t, in.ca, "bindery-webhook-tls", "bindery-webhook.bindery-system.svc"),
		{ObjectMeta: metav1.ObjectMeta{Name: "test-broker"}, StringData: map[string]string{"username": in.brokerUser, "password": in.brokerPass}},
	}
	for _, s := range secrets {
		if _, err := in.cs.CoreV1().Secrets("bindery-system").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits for the Deployments (two replicas each), the DaemonSet
// and the APIService.
func (in *install) waitReady(t *testing.T, began time.Time, how string) {
	t.Helper()
	cs := in.cs
	waitFor(t, 4*time.Minute, "the Deployments and the DaemonSet to be Ready", func(ctx context.Context) error {
		for _, name := range []string{"bindery-apiserver", "bindery-controller", "bindery-webhook"} {
			d, err := cs.AppsV1().Deployments("bindery-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := deploymentReady(d, 2); err != nil {
				return err
			}
		}
		ds, err := cs.AppsV1().DaemonSets("bindery-node").Get(ctx, "bindery-nodeagent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.NumberReady != 1 || ds.Status.DesiredNumberScheduled != 1 {
			return fmt.Errorf("DaemonSet bindery-nodeagent: %d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		return nil
	})
	t.Logf("Bindery's Pods Ready %s after %s", time.Since(began).Round(time.Millisecond), how)
	began = time.Now()
	waitFor(t, 2*time.Minute, "the APIService to be Available", func(ctx context.Context) error {
		out, err := in.c.Kubectl(t, "get", "apiservice", "v1beta1.servicecatalog.k8s.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, "True") {
			return errors.New(out)
		}
		return nil
	})
	t.Logf("APIService Available after %s", time.Since(began).Round(time.Millisecond))
}

// checkInstance registers the broker, provisions and binds through the
// aggregation layer, as a user of the cluster would, and returns the
// binding's Secret once its credentials opened the database. Two engines
// ran; each object must have been claimed by one of them.
func (in *install) checkInstance(t *testing.T) *corev1.Secret {
	t.Helper()
	c, ctx := in.c, t.Context()
	kubectl(ctx, t, c, []byte(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: test-broker
spec:
  url: `+in.broker.URL+`
  authInfo:
    basic:
      secretRef: {name: test-broker, namespace: bindery-system}
`), "apply", "-f", "-")
	kubectl(ctx, t, c, nil, "wait", "--for=condition=Ready", "--timeout=120s", "clusterservicebroker/test-broker")
	t.Logf("ClusterServiceBroker Ready")
	kubectl(ctx, t, c, nil, "create", "namespace", "shop")
	kubectl(ctx, t, c, []byte(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: db
  namespace: shop
spec:
  clusterServiceClassExternalName: postgresql
  clusterServicePlanExternalName: small
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: app
  namespace: shop
spec:
  instanceRef: {name: db}
  secretName: app-db
`), "apply", "-f", "-")
	// Both groups have a ServiceBinding: kubectl needs the group here.
	kubectl(ctx, t, c, nil, "wait", "--for=condition=Ready", "--timeout=180s", "-n", "shop",
		"serviceinstances.servicecatalog.k8s.io/db", "servicebindings.servicecatalog.k8s.io/app")
	t.Logf("ServiceInstance and ServiceBinding Ready")
	secret, err := in.cs.CoreV1().Secrets("shop").Get(ctx, "app-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, string(secret.Data["uri"]))
	if err != nil {
		t.Fatalf("connect with the binding's Secret: %v", err)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT session_user").Scan(&user); err != nil || user != string(secret.Data["username"]) {
		t.Errorf("session_user = %q, %v; want the Secret's username %q", user, err, secret.Data["username"])
	}
	conn.Close(ctx)
	if got := in.broker.count(http.MethodPut, "/v2/service_instances/*"); got != 1 {
		t.Errorf("the broker was asked to provision %d times, want 1", got)
	}
	if got := in.broker.count(http.MethodPut, "/v2/service_instances/*/service_bindings/*"); got != 1 {
		t.Errorf("the broker was asked to bind %d times, want 1", got)
	}
	return secret
}

// checkChained checks that the node agent's init container chained
// bindery-cni into the node's CNI configuration.
func (in *install) checkChained(t *testing.T) {
	t.Helper()
	conflists, _ := filepath.Glob(filepath.Join(in.n.CNIConfDir, "*.conflist"))
	var chained bool
	for _, f := range conflists {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chained = chained || strings.Contains(string(b), `"bindery-cni"`)
	}
	if !chained {
		t.Errorf("bindery-cni is in none of %v", conflists)
	}
}

// buildImage builds Bindery's image as `make image` does and writes it as a
// tarball tagged image.
func buildImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	programs := map[string]string{}
	for _, p := range []string{"bindery", "bindery-cni"} {
		programs[p] = filepath.Join(dir, p)
		if err := ociimage.BuildStatic(t.Context(), "..", "./cmd/"+p, programs[p]); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := ociimage.Bindery(programs, "/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo")
	if err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "bindery.tar")
	if err := ociimage.WriteFile(tarball, image, img); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// writeOverlay writes the kustomization that installs deploy/ on the test
// node (see TestInstallOnNode for what it changes) and returns its directory.
func writeOverlay(t *testing.T, n *kubetest.Node) string {
	t.Helper()
	dir := t.TempDir()
	deploy, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, deploy)
	if err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(image, ":")
	env := n.InClusterEnv()
	var envList []map[string]string
	for _, k := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		envList = append(envList, map[string]string{"name": k, "value": env[k]})
	}
	patch := func(kind, ns, name string, spec map[string]any) map[string]any {
		b, err := yaml.Marshal(map[string]any{
			"apiVersion": "apps/v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"template": map[string]any{"spec": spec}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"patch": string(b)}
	}
	withEnv := func(deployment, container string) map[string]any {
		return patch("Deployment", "bindery-system", deployment, map[string]any{
			"containers": []any{map[string]any{"name": container, "env": envList}},
		})
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"images":     []any{map[string]string{"name": "ghcr.io/bindery-dev/bindery", "newName": name, "newTag": tag}},
		"configMapGenerator": []any{map[string]any{
			"name": "bindery-cni", "namespace": "bindery-node", "behavior": "replace",
			// TEST-NET-3 (RFC 5737): nothing here uses it.
			"literals": []string{"managed-cidrs=203.0.113.0/24"},
		}},
		"patches": []any{
			withEnv("bindery-apiserver", "apiserver"),
			withEnv("bindery-controller", "controller"),
			withEnv("bindery-webhook", "webhook"),
			patch("DaemonSet", "bindery-node", "bindery-nodeagent", map[string]any{
				"volumes": []any{
					map[string]any{"name": "cni-bin", "hostPath": map[string]any{"path": n.CNIBinDir, "type": "Directory"}},
					map[string]any{"name": "cni-conf", "hostPath": map[string]any{"path": n.CNIConfDir, "type": "Directory"}},
				},
			}),
		},
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tlsSecret issues a serving certificate for host from ca, in a Secret
// as cert-manager writes one (tls.crt, tls.key, ca.crt).
func tlsSecret(t *testing.T, ca *pki.KeyPair, name, host string) *corev1.Secret {
	t.Helper()
	kp, err := ca.Issue(pki.Spec{CommonName: host, DNSNames: []string{host}, Usage: pki.Server, Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	key, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": kp.CertPEM(), "tls.key": key, "ca.crt": ca.CertPEM()},
	}
}

// deploymentReady says why a Deployment does not have want replicas
// updated, ready and available, or nil.
func deploymentReady(d *appsv1.Deployment, want int32) error {
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want {
		return fmt.Errorf("Deployment %s: %d updated, %d ready, %d available of %d", d.Name, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, want)
	}
	return nil
}

// waitFor polls f every half second until it returns nil, and fails t
// with f's last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dumpPods logs, for a failed test, the log tails of the Pods in the
// namespaces (a restarted container's last run first, since that run says
// why it stopped), then their state and events. The logs come first: the
// table of events is long, and a shortened output keeps its beginning.
func dumpPods(t *testing.T, c *kubetest.Cluster, cs kubernetes.Interface, namespaces ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := func(ns, pod, ctr string, previous bool) {
		args := []string{"-n", ns, "logs", pod, "-c", ctr, "--tail=20"}
		if previous {
			// Its last lines say why it stopped.
			args = append(args, "--previous", "--tail=10")
		}
		out, _ := c.KubectlCommand(ctx, kubetest.Admin, args...).CombinedOutput()
		t.Logf("logs of %s/%s %s (previous run: %t):\n%s", ns, pod, ctr, previous, out)
	}
	for _, ns := range namespaces {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("namespace %s: %v", ns, err)
			continue
		}
		for _, p := range pods.Items {
			for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if st.RestartCount > 0 {
					logs(ns, p.Name, st.Name, true)
				}
			}
		}
		for _, p := range pods.Items {
			for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				logs(ns, p.Name, ctr.Name, false)
			}
		}
	}
	for _, ns := range namespaces {
		out, _ := c.KubectlCommand(ctx, kubetest.Admin, "-n", ns, "get", "all,events", "-o", "wide").CombinedOutput()
		t.Logf("namespace %s:\n%s", ns, out)
	}
}

// relayURL relays TCP connections from the node's address ip to the host
// and port of the URL u, and returns u pointing at the relay. When the test
// ends it closes the connections too: the Pods holding them (database
// pools) still run then, as the cluster stops after.
func relayURL(t *testing.T, ip, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	target := parsed.Host
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			track(in, true)
			track(out, true)
			wg.Add(2)
			// Each direction closes both ends when it ends, so that the
			// other ends too.
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				track(dst, false)
				track(src, false)
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	parsed.Host = l.Addr().String()
	return parsed.String()
}

// countingProxy forwards HTTP requests to a broker and counts them by
// method and path.
type countingProxy struct {
	URL      string
	mu       sync.Mutex
	requests []string // "METHOD /path"
}

func newCountingProxy(t *testing.T, ip, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{URL: "http://" + l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// count is how many requests had method and a path matching pattern,
// where * stands for one segment.
func (p *countingProxy) count(method, pattern string) int {
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, `[^/]+`) + "$")
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		m, path, _ := strings.Cut(r, " ")
		if m == method && re.MatchString(path) {
			n++
		}
	}
	return n
}

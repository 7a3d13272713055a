package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// realNode is everything TestBindingOnRealNode runs: a real node with
// bindery-cni chained after its bridge, a target PostgreSQL on addresses
// of a managed range that the test makes on the host, `bindery up` with
// the webhook, and `bindery serve apiserver` behind the cluster's
// aggregation layer.
type realNode struct {
	cluster   *kubetest.Cluster
	kube      kubernetes.Interface
	managed   netip.Prefix
	dbAddr    netip.Addr // the target PostgreSQL, which bindings grant
	otherAddr netip.Addr // the same server, on an address no binding grants
	dbPort    int
	stateDir  string // bindery-cni's records of attachments
	apiAddr   netip.AddrPort
	up        *proc
}

// managedLink carries the managed range's addresses; a bridge with no
// ports, as kubetest's node link, since this kernel may lack dummy links.
const managedLink = "bindery-e2emgd"

func setupRealNode(t *testing.T) *realNode {
	t.Helper()
	cluster := kubetest.Start(t, kubetest.WithNode())
	node := cluster.Node()
	r := &realNode{cluster: cluster, kube: cluster.Client(t), stateDir: filepath.Join(node.Dir, "bindery-cni-state")}

	// The managed range: a free /24 of 198.18.128.0/17, on a link of the
	// host. Pods reach the host's addresses through their gateway.
	r.managed = freeRange(t)
	r.dbAddr = r.managed.Addr().Next()
	r.otherAddr = r.dbAddr.Next()
	mustRunCmd(t, "ip", "link", "add", managedLink, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", managedLink).Run() })
	for _, a := range []netip.Addr{r.dbAddr, r.otherAddr} {
		mustRunCmd(t, "ip", "addr", "add", netip.PrefixFrom(a, r.managed.Bits()).String(), "dev", managedLink)
	}
	mustRunCmd(t, "ip", "link", "set", managedLink, "up")

	// The target PostgreSQL, listening on both addresses and letting the
	// Pods' range and the host's in with a password.
	base, err := os.MkdirTemp("", "bindery-target-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	target, err := pgserver.Start(t.Context(), filepath.Join(base, "pg"), pgserver.Options{
		Fast: true, Listen: []netip.Addr{r.dbAddr, r.otherAddr},
		Allow: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Stop() })
	r.dbPort = target.Port()
	targetURL, err := url.Parse(target.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	targetURL.Host = net.JoinHostPort(r.dbAddr.String(), strconv.Itoa(r.dbPort))

	// bindery-cni, chained after the node's bridge as the DaemonSet's
	// init container chains it.
	pluginDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "bindery-cni"), "github.com/bindery-dev/bindery/cmd/bindery-cni")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build builds it
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build bindery-cni: %v\n%s", err, out)
	}
	install := start(t, nil, "serve", "nodeagent", "--install-cni", "--cni-plugin-binary", filepath.Join(pluginDir, "bindery-cni"),
		"--cni-bin-dir", node.CNIBinDir, "--cni-conf-dir", node.CNIConfDir,
		"--cni-managed-cidrs", r.managed.String(), "--cni-state-dir", r.stateDir)
	if err := install.wait(t); err != nil {
		t.Fatalf("--install-cni: %v\n%s", err, install.stderr.String())
	}

	// bindery up, its broker creating databases in the target.
	dbURL := pgtest.New(t)
	r.up, _ = upWithCluster(t, cluster, filepath.Join(t.TempDir(), "data"), freeTCPPort(t),
		[]string{"DATABASE_URL=" + dbURL}, "--target-database-url", targetURL.String())

	// The aggregated API: bindery serve apiserver on the node's address
	// (kube-apiserver takes no loopback endpoint), behind deploy/bindery's
	// Service and APIService.
	l, err := net.Listen("tcp", net.JoinHostPort(kubetest.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r.apiAddr = l.Addr().(*net.TCPAddr).AddrPort()
	l.Close()
	apiDir := t.TempDir()
	api := start(t, []string{"DATABASE_URL=" + dbURL, "KUBECONFIG=" + cluster.Kubeconfig()}, "serve", "apiserver",
		"--listen", r.apiAddr.String(), "--data-dir", apiDir, "--tls-hosts", "bindery-apiserver.bindery-system.svc")
	servingURL(t, api, "serving the Kubernetes API behind the cluster's aggregation layer")
	for _, f := range []string{"namespace.yaml", "service.yaml"} {
		if _, err := cluster.Kubectl(t, "apply", "-f", filepath.Join("..", "..", "deploy", "bindery", "base", f)); err != nil {
			t.Fatal(err)
		}
	}
	port, proto := int32(r.apiAddr.Port()), corev1.ProtocolTCP
	if _, err := r.kube.DiscoveryV1().EndpointSlices("bindery-system").Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "bindery-apiserver-test", Labels: map[string]string{
			discoveryv1.LabelServiceName: "bindery-apiserver", discoveryv1.LabelManagedBy: "bindery-tests",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{kubetest.NodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiService, err := os.ReadFile(filepath.Join("..", "..", "deploy", "bindery", "base", "apiservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(apiDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	withCA := strings.Replace(string(apiService), "\nspec:\n", "\nspec:\n  caBundle: "+base64.StdEncoding.EncodeToString(ca)+"\n", 1)
	if _, err := cluster.KubectlAs(t, kubetest.Admin, []byte(withCA), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Kubectl(t, "wait", "--for=condition=Available", "apiservice/v1beta1.servicecatalog.k8s.io", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, api.stderr.String())
	}
	return r
}

// TestBindingOnRealNode follows a binding from the aggregated API to a
// packet on a real node (kubelet and containerd): a ServiceInstance and a
// Service Catalog ServiceBinding made with kubectl through kube-apiserver,
// Bindery's broker creating the database in the target PostgreSQL; a
// servicebinding.io ServiceBinding pointing at it projects the binding
// into a Deployment, whose Pod reads /bindings/<name>/* and carries the
// egress annotation; containerd runs bindery-cni, which lets the Pod reach
// the bound database (nc from inside, psql with the binding's credentials
// from its network namespace) and nothing else in the managed range,
// while a Pod without the binding reaches nothing there but still reaches
// an address outside it. Deleting the Pods leaves no record behind.
func TestBindingOnRealNode(t *testing.T) {
	r := setupRealNode(t)
	ctx := t.Context()
	const ns = "shop"
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := r.cluster.KubectlAs(t, kubetest.Admin, []byte(stdin), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\nup:\n%s", strings.Join(args, " "), err, r.up.stderr.String())
		}
		return out
	}
	kubectl("", "create", "namespace", ns)
	kubectl(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata: {name: orders-db, namespace: shop}
spec: {clusterServiceClassExternalName: postgresql, clusterServicePlanExternalName: small}
---
apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata: {name: orders, namespace: shop}
spec: {instanceRef: {name: orders-db}}
`, "apply", "-f", "-")
	eventually.Succeeds(t, 3*time.Minute, func(ctx context.Context) error {
		out, err := r.cluster.Kubectl(t, "get", "-n", ns, "servicebindings.servicecatalog.k8s.io", "orders", "-o", "jsonpath={.status.binding.name}")
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("the Service Catalog binding has no status.binding.name yet (%v)\nup:\n%s", err, r.up.stderr.String())
		}
		return nil
	})
	eps := kubectl("", "get", "-n", ns, "servicebindings.servicecatalog.k8s.io", "orders", "-o", "jsonpath={.status.endpoints}")
	wantEgress := fmt.Sprintf(`[{"host":"%s","ports":["%d"],"protocol":"tcp"}]`, r.dbAddr, r.dbPort)
	if eps != wantEgress {
		t.Fatalf("status.endpoints of the Service Catalog binding: %s, want %s", eps, wantEgress)
	}
	secret, err := r.kube.CoreV1().Secrets(ns).Get(ctx, "orders", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}

	// The application team's three lines, and its Deployment.
	c := crClient(t, r.cluster)
	sb := &sbv1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: sbv1.ServiceBindingSpec{
		Service:  sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "orders"},
		Workload: sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		n, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil || n.Labels[servicebinding.NamespaceLabel] != "true" {
			return fmt.Errorf("namespace %s not labelled for the webhook yet (%v)", ns, err)
		}
		return nil
	})
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      automountServiceAccountToken: false
      containers:
      - {name: main, image: ` + kubetest.BusyboxImage + `, imagePullPolicy: Never, command: [sh, -c, exec sleep 3600]}
`
	// kube-apiserver learns of the namespace's label from its informer: a
	// dry run shows when it calls the webhook for the namespace.
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		out, err := r.cluster.KubectlAs(t, kubetest.Admin, []byte(deployment), "apply", "--dry-run=server", "-o", "jsonpath={.spec.template.spec.volumes[*].name}", "-f", "-")
		if err != nil || !strings.Contains(out, servicebinding.VolumeName(sb.UID)) {
			return fmt.Errorf("a dry run of the Deployment is not projected yet: %q, %v", out, err)
		}
		return nil
	})
	kubectl(deployment, "apply", "-f", "-")
	var web corev1.Pod
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Annotations[servicebinding.EgressAnnotation] != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				web = p
				return nil
			}
		}
		return fmt.Errorf("no Running Pod of web with the egress annotation yet: %d Pods\nup:\n%s", len(pods.Items), r.up.stderr.String())
	})
	if got := web.Annotations[servicebinding.EgressAnnotation]; got != wantEgress {
		t.Errorf("egress annotation %s, want %s", got, wantEgress)
	}
	// Projected at admission, the Deployment is right from its first
	// ReplicaSet: the controller has nothing to change, so no rollout.
	if rss, err := r.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"}); err != nil || len(rss.Items) != 1 {
		var templates []string
		for _, rs := range rss.Items {
			b, _ := json.Marshal(rs.Spec.Template)
			templates = append(templates, string(b))
		}
		t.Errorf("web has %d ReplicaSets (%v), want 1:\n%s", len(rss.Items), err, strings.Join(templates, "\n"))
	}

	// The binding, read inside the container.
	for _, key := range []string{"type", "provider", "uri", "username", "password"} {
		out := kubectl("", "exec", "-n", ns, web.Name, "--", "cat", "/bindings/orders/"+key)
		if out != string(secret.Data[key]) || out == "" {
			// The value may be a credential: say only that it differs.
			t.Errorf("/bindings/orders/%s inside the Pod (%d bytes) is not the Secret's %s (%d bytes)", key, len(out), key, len(secret.Data[key]))
		}
	}
	if out := kubectl("", "exec", "-n", ns, web.Name, "--", "sh", "-c", "echo $SERVICE_BINDING_ROOT"); strings.TrimSpace(out) != "/bindings" {
		t.Errorf("SERVICE_BINDING_ROOT inside the Pod: %q", out)
	}

	// The network: the bound database only.
	if !r.reaches(t, ns, web.Name, r.dbAddr, r.dbPort) {
		t.Errorf("the bound Pod does not reach the bound database %s:%d", r.dbAddr, r.dbPort)
	}
	if r.reaches(t, ns, web.Name, r.otherAddr, r.dbPort) {
		t.Errorf("the bound Pod reaches %s:%d, which no binding grants", r.otherAddr, r.dbPort)
	}
	netns := podNetNS(t, web.Status.PodIP)
	uri := string(secret.Data["uri"])
	// session_user: the binding's role logs in, then acts as the
	// instance's owner (current_user), so what it creates outlives it.
	if out, err := psqlIn(netns, uri, "SELECT session_user"); err != nil || out != string(secret.Data["username"]) {
		t.Errorf("psql from the Pod's network namespace with the binding's URI: %q, %v", out, err)
	}
	other := strings.Replace(uri, r.dbAddr.String(), r.otherAddr.String(), 1)
	if out, err := psqlIn(netns, other, "SELECT 1"); err == nil || !strings.Contains(out, "timeout") {
		t.Errorf("psql from the Pod's network namespace to %s: %q, %v; want a connection timeout (dropped)", r.otherAddr, out, err)
	}

	// A Pod without the binding: nothing in the range, the rest as before.
	plain := kubetest.BusyboxPod("plain", "exec sleep 3600")
	if _, err := r.kube.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plainPod := kubetest.WaitPodRunning(t, r.kube, ns, "plain")
	if v, ok := plainPod.Annotations[servicebinding.EgressAnnotation]; ok {
		t.Errorf("the Pod without a binding carries %s=%s", servicebinding.EgressAnnotation, v)
	}
	if r.reaches(t, ns, "plain", r.dbAddr, r.dbPort) {
		t.Errorf("the Pod without a binding reaches the database %s:%d", r.dbAddr, r.dbPort)
	}
	if !r.reaches(t, ns, "plain", r.apiAddr.Addr(), int(r.apiAddr.Port())) {
		t.Errorf("the Pod without a binding does not reach %s, outside the managed range", r.apiAddr)
	}
	if recs := r.records(t); len(recs) != 2 {
		t.Errorf("bindery-cni recorded %d attachments for the two Pods: %v", len(recs), recs)
	}

	// Deleting the Pods leaves no record and no namespace behind.
	kubectl("", "delete", "-n", ns, "deployment/web", "pod/plain", "--wait=true")
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left (%v)", len(pods.Items), err)
		}
		if recs := r.records(t); len(recs) > 0 {
			return fmt.Errorf("bindery-cni records left: %v", recs)
		}
		if _, err := os.Stat(netns); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the Pod's network namespace %s is still there (%v)", netns, err)
		}
		return nil
	})
}

// reaches reports whether a TCP connection from inside the Pod to addr
// opens within three seconds (busybox nc); a dropped SYN times out.
func (r *realNode) reaches(t *testing.T, ns, pod string, addr netip.Addr, port int) bool {
	t.Helper()
	out, err := r.cluster.Kubectl(t, "exec", "-n", ns, pod, "--", "sh", "-c",
		fmt.Sprintf("if nc -w 3 %s %d </dev/null; then echo open; else echo closed; fi", addr, port))
	if err != nil {
		t.Fatalf("nc in %s: %v", pod, err)
	}
	return strings.TrimSpace(out) == "open"
}

// records lists bindery-cni's records of attachments.
func (r *realNode) records(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(r.stateDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// podNetNS returns the path of the network namespace that holds ip, as
// containerd names them under /run/netns.
func podNetNS(t *testing.T, ip string) string {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		out, err := exec.Command("ip", "-n", e.Name(), "-4", "-o", "addr", "show").CombinedOutput()
		if err == nil && strings.Contains(string(out), " "+ip+"/") {
			return filepath.Join("/run/netns", e.Name())
		}
	}
	t.Fatalf("no network namespace under /run/netns holds %s", ip)
	return ""
}

// psqlIn runs psql in the network namespace at path with a three-second
// connection timeout, and returns its trimmed output.
func psqlIn(netns, uri, query string) (string, error) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
		if len(m) == 0 {
			return "", errors.New("no psql (apt-get install postgresql-client)")
		}
		psql = m[len(m)-1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", filepath.Base(netns), psql, "-X", "-tA", "-c", query, uri)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=3")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// freeRange picks a /24 of 198.18.128.0/17 that no route on the host
// overlaps (RFC 2544's block, as kubetest's and netnstest's addresses).
func freeRange(t *testing.T) netip.Prefix {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-j", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip route: %v", err)
	}
	var routes []struct {
		Dst    string `json:"dst"`
		Prefix int    `json:"prefixlen"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		t.Fatalf("ip -j route: %v", err)
	}
	var taken []netip.Prefix
	for _, r := range routes {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			taken = append(taken, p)
		} else if a, err := netip.ParseAddr(r.Dst); err == nil {
			taken = append(taken, netip.PrefixFrom(a, 32))
		}
	}
	for range 50 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(128 + rand.IntN(128)), 0}), 24)
		free := true
		for _, r := range taken {
			if r.Overlaps(p) {
				free = false
			}
		}
		if free {
			return p
		}
	}
	t.Fatal("no free /24 in 198.18.128.0/17")
	return netip.Prefix{}
}

func mustRunCmd(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

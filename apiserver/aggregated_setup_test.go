package apiserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/netnstest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// Users of the aggregated tests, besides kubetest's Admin, Alice (no
// rights) and Bob: Carol edits and Victor views the team namespace.
const (
	carol  = "carol"
	victor = "victor"
	team   = "team-a"
)

// The names deploy/bindery gives the server's objects.
const (
	systemNamespace = "bindery-system"
	serviceName     = "bindery-apiserver"
	apiServiceName  = "v1beta1.servicecatalog.k8s.io"
)

// aggregated is Bindery's API server behind a real kube-apiserver's
// aggregation layer: the server runs in this process, but its listening
// socket lives in a network namespace the test made, at an address
// kube-apiserver accepts as an endpoint; an EndpointSlice points the
// Service of deploy/bindery at it. The server and the engine act as the
// ServiceAccounts deploy/bindery's RBAC gives them.
type aggregated struct {
	t       testing.TB
	cluster *kubetest.Cluster
	kube    kubernetes.Interface
	pool    *pgxpool.Pool
	store   *catalog.Store
	keys    *keyring.Keyring
	// available is how long the APIService took to become Available once
	// it pointed at the server.
	available time.Duration
	// brokerURL is where Bindery's own broker answers.
	brokerURL string
	// server is the API server's process (aggregateProcess), else nil: the
	// server runs in this process.
	server *serverProcess
}

// aggregate starts it all: cluster (with the clusterrole-aggregation
// controller, so deploy/bindery's roles reach admin/edit/view, and the
// namespace controller, which empties deleted namespaces), database,
// Bindery's own broker registered as "bindery", the API server, the
// APIService, and the engine when engine is true.
func aggregate(t testing.TB, engine bool) *aggregated {
	t.Helper()
	return aggregateWith(t, engine, engine)
}

// aggregateWith is aggregate; with engine but not register, the broker is
// left for the test to register (brokerURL).
func aggregateWith(t testing.TB, engine, register bool) *aggregated {
	t.Helper()
	return aggregateServer(t, engine, register, false)
}

// aggregateProcess is aggregate without the engine, the API server run as
// its own process, `bindery serve apiserver` as deploy/bindery runs it, so
// that a benchmark measures the server's memory alone (aggregated.server).
func aggregateProcess(t testing.TB) *aggregated {
	t.Helper()
	return aggregateServer(t, false, false, true)
}

func aggregateServer(t testing.TB, engine, register, separate bool) *aggregated {
	t.Helper()
	ctx := context.Background()
	ns := netnstest.New(t) // first: it skips the test without root
	cluster := kubetest.Start(t, kubetest.WithControllerManager("clusterrole-aggregation", "namespace"), kubetest.WithUser(carol), kubetest.WithUser(victor))
	a := &aggregated{t: t, cluster: cluster, kube: cluster.Client(t)}

	// deploy/bindery as an operator applies it, all but the APIService,
	// which comes once the server answers. Its Deployments stay unrolled
	// (no controller manager runs them, no kubelet would run their Pods):
	// the server and the engine run in this process instead, as its
	// ServiceAccounts.
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "aggregated-roles.yaml", "apiserver.yaml", "controller.yaml", "service.yaml"} {
		a.kubectl(kubetest.Admin, nil, "apply", "-f", deployFile(f))
	}
	// The kustomizations an operator applies render, and what they hold
	// passes kube-apiserver's validation (cert-manager's kinds only render:
	// this cluster has no cert-manager).
	deploy := filepath.Join("..", "deploy", "bindery")
	a.kubectl(kubetest.Admin, nil, "apply", "-k", deploy, "--dry-run=server")
	a.kubectl(kubetest.Admin, nil, "kustomize", filepath.Join(deploy, "cert-manager"))
	a.kubectl(kubetest.Admin, nil, "create", "namespace", team)
	a.kubectl(kubetest.Admin, nil, "create", "rolebinding", "carol-edit", "-n", team, "--clusterrole=edit", "--user="+carol)
	a.kubectl(kubetest.Admin, nil, "create", "rolebinding", "victor-view", "-n", team, "--clusterrole=view", "--user="+victor)

	a.pool = pgtest.Pool(t)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, a.pool, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The API server's store, as deploy/bindery runs it: no encryption
	// keys, no Secrets (its role has none). The engine gets its own store,
	// with both.
	a.store = catalog.NewStore(a.pool, nil, log)
	a.keys = keys
	brokerURL := brokertest.Start(t, a.pool, keys, "osb", "osb-pass")
	a.brokerURL = brokerURL
	if !engine {
		b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: brokerURL}}
		b.Name = "bindery"
		keyed := catalog.NewStore(a.pool, keys, log)
		if b, err = keyed.CreateBroker(ctx, b, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "osb", Password: "osb-pass"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := keyed.Relist(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}

	// The aggregator checks the certificate against the Service's name.
	host := serviceName + "." + systemNamespace + ".svc"
	var endpoint netip.AddrPort
	var caData []byte
	if separate {
		// A process of its own cannot take a socket from the namespace: it
		// listens on the host's end of the veth pair, an address this test
		// made that kube-apiserver accepts as an endpoint.
		a.server = startServerProcess(t, ns.HostIP, a.pool.Config().ConnString(), a.serviceAccountKubeconfig("bindery-apiserver"), host)
		endpoint, caData = a.server.addr, a.server.caData
	} else {
		l, err := ns.Listen("tcp", netip.AddrPortFrom(ns.IP, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		opts := &apiserver.Options{
			Listener: l, DataDir: filepath.Join(t.TempDir(), "apiserver"),
			ClusterKubeconfig: a.serviceAccountKubeconfig("bindery-apiserver"),
			Hosts:             []string{host},
		}
		srv := runServer(t, opts, a.store, log)
		endpoint, caData = l.Addr().(*net.TCPAddr).AddrPort(), srv.CAData
	}
	port := int32(endpoint.Port())

	// The Service has a selector, for the Deployment's Pods; with no
	// kubelet there are none, and no endpoint controller runs, so the
	// test writes the EndpointSlice that controller would.
	svc, err := a.kube.CoreV1().Services(systemNamespace).Get(ctx, serviceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	portName := svc.Spec.Ports[0].Name
	up, proto := true, svc.Spec.Ports[0].Protocol
	_, err = a.kube.DiscoveryV1().EndpointSlices(systemNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName + "-test", Labels: map[string]string{
			discoveryv1.LabelServiceName: serviceName,
			discoveryv1.LabelManagedBy:   "bindery-tests",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{endpoint.Addr().String()}, Conditions: discoveryv1.EndpointConditions{Ready: &up}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The APIService of deploy/bindery, with the caBundle cert-manager
	// would inject: here the server's own CA.
	apiService, err := os.ReadFile(deployFile("apiservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withCA := strings.Replace(string(apiService), "\nspec:\n", "\nspec:\n  caBundle: "+base64.StdEncoding.EncodeToString(caData)+"\n", 1)
	began := time.Now()
	a.kubectl(kubetest.Admin, []byte(withCA), "apply", "-f", "-")
	a.kubectl(kubetest.Admin, nil, "wait", "--for=condition=Available", "apiservice/"+apiServiceName, "--timeout=60s")
	a.available = time.Since(began)
	t.Logf("APIService Available %s after it was applied", a.available.Round(time.Millisecond))

	if engine {
		a.startEngine(log)
	}
	if engine && register {
		a.registerBroker(brokerURL)
	}
	return a
}

// registerBroker registers Bindery's broker with kubectl, as an
// administrator would, its credentials in a Secret that only the engine
// reads. The first Secret named lacks the password: the broker's status
// says so; pointing the broker at a complete Secret fetches its catalogue.
func (a *aggregated) registerBroker(url string) {
	a.t.Helper()
	a.kubectl(kubetest.Admin, nil, "create", "secret", "generic", "broker-incomplete", "-n", systemNamespace, "--from-literal=username=osb")
	a.kubectl(kubetest.Admin, nil, "create", "secret", "generic", "broker", "-n", systemNamespace,
		"--from-literal=username=osb", "--from-literal=password=osb-pass")
	a.kubectl(kubetest.Admin, []byte(fmt.Sprintf(brokerWithSecret, url, "broker-incomplete")), "apply", "-f", "-")
	eventually.Succeeds(a.t, 30*time.Second, func(context.Context) error {
		msg := a.kubectl(kubetest.Admin, nil, "get", "clusterservicebroker", "bindery", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		if !strings.Contains(msg, `no key "password"`) {
			return fmt.Errorf("the broker's status never said the Secret lacks the password: %q", msg)
		}
		return nil
	})
	a.kubectl(kubetest.Admin, []byte(fmt.Sprintf(brokerWithSecret, url, "broker")), "apply", "-f", "-")
	a.kubectl(kubetest.Admin, nil, "wait", "--for=condition=Ready", "clusterservicebroker/bindery", "--timeout=30s")
}

const brokerWithSecret = `apiVersion: servicecatalog.k8s.io/v1beta1
kind: ClusterServiceBroker
metadata:
  name: bindery
spec:
  url: %s
  authInfo:
    basic:
      secretRef:
        name: %s
        namespace: bindery-system
`

// startEngine runs the engine as the bindery-controller ServiceAccount.
func (a *aggregated) startEngine(log *slog.Logger) {
	a.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", a.serviceAccountKubeconfig("bindery-controller"))
	if err != nil {
		a.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	events := controller.NewEvents(kube, 0)
	evCtx, stopEvents := context.WithCancel(context.Background())
	a.t.Cleanup(stopEvents)
	if err := events.Start(evCtx); err != nil {
		a.t.Fatal(err)
	}
	store := catalog.NewStore(a.pool, a.keys, log,
		catalog.ReadSecretsWith(controller.KubeSecrets{Kube: kube}), catalog.PublishEventsTo(events.Publish))
	e, err := controller.New(controller.Config{Store: store, Kube: kube, Logger: log, BrokerTimeout: 30 * time.Second, Workers: 4,
		RelistCheck: 100 * time.Millisecond})
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	a.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				a.t.Errorf("engine: %v", err)
			}
		case <-time.After(30 * time.Second):
			a.t.Error("engine did not stop")
		}
	})
}

// serviceAccountKubeconfig writes a kubeconfig that reaches the cluster as
// the ServiceAccount name of bindery-system, with a token from the
// TokenRequest API, as a Pod of the Deployment would.
func (a *aggregated) serviceAccountKubeconfig(name string) string {
	a.t.Helper()
	token := strings.TrimSpace(a.kubectl(kubetest.Admin, nil, "create", "token", name, "-n", systemNamespace, "--duration=2h"))
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: a.cluster.URL, CertificateAuthorityData: a.cluster.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name}
	cfg.CurrentContext = "cluster"
	path := filepath.Join(a.t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		a.t.Fatal(err)
	}
	return path
}

// deployFile is the path of a file of deploy/bindery/base.
func deployFile(name string) string {
	return filepath.Join("..", "deploy", "bindery", "base", name)
}

// kubectl runs kubectl as user against the cluster and fails the test on
// an error.
func (a *aggregated) kubectl(user string, stdin []byte, args ...string) string {
	a.t.Helper()
	out, err := a.cluster.KubectlAs(a.t, user, stdin, args...)
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

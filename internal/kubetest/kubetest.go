// Package kubetest starts a real Kubernetes control plane — etcd and
// kube-apiserver, built by tools/kube/build.sh into ./bin — for one test, on
// free loopback ports, with static bearer tokens and RBAC.
//
// Nothing else of a cluster runs: no kube-controller-manager (so no default
// ServiceAccounts, no garbage collection by ownerReference, and deleted
// namespaces stay Terminating), no scheduler and no kubelet (Pods stay Pending).
// Tests that need more must start it themselves; see DESIGN.md, "Kubernetes for tests".
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Admin is the user of Config and Kubeconfig: a member of system:masters,
// which RBAC allows everything.
const Admin = "admin"

// Alice and Bob are users that exist in every cluster, with no rights beyond
// those RBAC gives every authenticated user; tests grant them what they need.
const (
	Alice = "alice"
	Bob   = "bob"
)

// EnvBin names the environment variable that overrides the directory holding
// etcd, kube-apiserver and kubectl (default: bin/ at the repository root).
const EnvBin = "BINDERY_KUBE_BIN"

const (
	modulePath   = "github.com/bindery-dev/bindery"
	buildHint    = "run `make bin/kube-apiserver` (tools/kube/build.sh) to build them"
	readyTimeout = 90 * time.Second
	stopGrace    = 5 * time.Second
)

// errPortTaken means a process could not bind the port chosen for it.
var errPortTaken = errors.New("port already in use")

// User is an identity the API server authenticates by a static bearer token.
type User struct {
	Name   string
	Groups []string
}

// Option changes how Start configures the cluster.
type Option func(*options)

type options struct {
	users []User
	flags []string
}

// WithUser adds a user with its own bearer token and the given groups, on top
// of Admin, Alice and Bob. The token file is read once at start-up, so every
// user a test needs must be named here.
func WithUser(name string, groups ...string) Option {
	return func(o *options) { o.users = append(o.users, User{Name: name, Groups: groups}) }
}

// WithAPIServerFlags appends flags to kube-apiserver's command line, after
// Start's own, so a flag given here overrides Start's value for it
// (for example "--bind-address=0.0.0.0" for a server in a network namespace).
func WithAPIServerFlags(flags ...string) Option {
	return func(o *options) { o.flags = append(o.flags, flags...) }
}

// Cluster is a running etcd and kube-apiserver. Its processes stop, and its
// data is removed, when the test that started it ends.
type Cluster struct {
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// CAData is the PEM bundle that verifies the API server's serving certificate.
	CAData []byte
	// CAFile is the path of a file holding CAData.
	CAFile string
	// StartupTime is how long the control plane took to become ready.
	StartupTime time.Duration

	bin         string
	dir         string
	users       map[string]User
	tokens      map[string]string
	kubeconfigs map[string]string
	procs       []*process
	spawner     *spawner
}

// Start starts etcd and kube-apiserver for t and waits until the API server is
// ready. It fails t when the binaries are missing or the control plane does
// not come up; the processes' logs are then in t's output.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var c *Cluster
	var err error
	for attempt := 1; ; attempt++ {
		c, err = start(t.Context(), t.TempDir(), opts...)
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			break
		}
		// Another process took a port between freePorts and the bind.
		t.Logf("kubetest: %v; starting again", err)
		if err := c.stop(); err != nil {
			t.Logf("kubetest: stop control plane: %v", err)
		}
	}
	if c != nil {
		t.Cleanup(func() {
			if err := c.stop(); err != nil {
				t.Errorf("kubetest: stop control plane: %v", err)
			}
			if t.Failed() {
				c.logTails(t)
			}
		})
	}
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Logf("kubetest: control plane at %s ready in %s", c.URL, c.StartupTime.Round(time.Millisecond))
	return c
}

// Config returns a client configuration for Admin.
func (c *Cluster) Config() *rest.Config { return c.ConfigFor(Admin) }

// ConfigFor returns a client configuration that authenticates as user, which
// must be Admin, Alice, Bob or a user given with WithUser; any other name
// panics, as it is a mistake in the test.
func (c *Cluster) ConfigFor(user string) *rest.Config {
	return &rest.Config{
		Host:            c.URL,
		BearerToken:     c.Token(user),
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(c.CAData)},
		// The defaults (5 QPS, burst 10) would make tests that create many
		// objects measure client-go's rate limiter rather than Bindery.
		QPS:   1000,
		Burst: 2000,
	}
}

// Token returns user's bearer token; see ConfigFor for which users exist.
func (c *Cluster) Token(user string) string {
	tok, ok := c.tokens[user]
	if !ok {
		panic(fmt.Sprintf("kubetest: no user %q in this cluster: add it with kubetest.WithUser", user))
	}
	return tok
}

// Client returns a typed client for Admin.
func (c *Cluster) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatalf("kubetest: client: %v", err)
	}
	return cs
}

// Kubeconfig returns the path of a kubeconfig file for Admin, for kubectl and
// for Bindery's --kubeconfig flag.
func (c *Cluster) Kubeconfig() string { return c.KubeconfigFor(Admin) }

// KubeconfigFor returns the path of a kubeconfig file for user; see ConfigFor
// for which users exist.
func (c *Cluster) KubeconfigFor(user string) string {
	c.Token(user) // panics on an unknown user, with the reason
	return c.kubeconfigs[user]
}

// Kubectl runs bin/kubectl as Admin with args and returns its standard output.
// The error includes kubectl's standard error.
func (c *Cluster) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return c.kubectl(t.Context(), Admin, nil, args...)
}

// KubectlAs runs bin/kubectl as user, with stdin (which may be nil) as its
// standard input, for example a manifest for `apply -f -`.
func (c *Cluster) KubectlAs(t testing.TB, user string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	return c.kubectl(t.Context(), user, stdin, args...)
}

func (c *Cluster) kubectl(ctx context.Context, user string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigFor(user)}, args...)...)
	// Keep kubectl's caches and plugins away from the developer's home.
	cmd.Env = append(os.Environ(), "HOME="+c.dir, "KUBECACHEDIR="+filepath.Join(c.dir, "kubectl-cache"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// start does the work of Start without a testing.TB, so that a benchmark can
// start and stop many clusters. On error it may return a cluster whose
// processes must still be stopped.
func start(ctx context.Context, dir string, opts ...Option) (*Cluster, error) {
	began := time.Now()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		bin:         bin,
		dir:         dir,
		users:       map[string]User{},
		tokens:      map[string]string{},
		kubeconfigs: map[string]string{},
	}
	for _, u := range append([]User{{Name: Admin, Groups: []string{"system:masters"}}, {Name: Alice}, {Name: Bob}}, o.users...) {
		if _, dup := c.users[u.Name]; dup {
			return nil, fmt.Errorf("user %q given twice", u.Name)
		}
		c.users[u.Name] = u
	}

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	pki, err := c.writeFiles()
	if err != nil {
		return nil, err
	}

	c.spawner = newSpawner()
	// kube-apiserver retries etcd until it answers, so both start at once.
	if _, err := c.spawn("etcd",
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdClient,
		"--advertise-client-urls="+etcdClient,
		"--listen-peer-urls="+etcdPeer,
		"--initial-advertise-peer-urls="+etcdPeer,
		"--initial-cluster=kubetest="+etcdPeer,
		// The data is thrown away after the test: durability only costs time.
		"--unsafe-no-fsync",
		"--log-level=warn",
	); err != nil {
		return c, err
	}
	args := []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + pki.serving.cert,
		"--tls-private-key-file=" + pki.serving.key,
		"--client-ca-file=" + pki.clientCA,
		"--token-auth-file=" + pki.tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.serviceAccount,
		"--service-account-signing-key-file=" + pki.serviceAccount,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// Nothing creates default ServiceAccounts without a controller manager.
		"--disable-admission-plugins=ServiceAccount",
		// What an aggregated API server (Bindery's) needs to trust the aggregator.
		"--requestheader-client-ca-file=" + pki.frontProxyCA,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + pki.frontProxyClient.cert,
		"--proxy-client-key-file=" + pki.frontProxyClient.key,
		"--enable-aggregator-routing=true",
		// The "kubernetes" Service cannot point at a loopback address, and
		// nothing in a test uses it.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if _, err := c.spawn("kube-apiserver", append(args, o.flags...)...); err != nil {
		return c, err
	}
	if err := c.waitReady(ctx); err != nil {
		return c, err
	}
	c.StartupTime = time.Since(began)
	return c, nil
}

// waitReady polls /readyz as Admin until it answers 200, then waits for the
// "default" namespace, which the API server creates shortly after.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   5 * time.Second,
	}
	defer client.CloseIdleConnections()
	var last string
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		for {
			last = c.probe(ctx, client, path)
			if last == "" {
				break
			}
			for _, p := range c.procs {
				select {
				case <-p.done:
					err := fmt.Errorf("%s exited while waiting for %s: %w (log: %s)", p.name, path, p.err, p.logPath)
					if log, _ := os.ReadFile(p.logPath); bytes.Contains(log, []byte("address already in use")) {
						err = fmt.Errorf("%w: %w", errPortTaken, err)
					}
					return err
				default:
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for %s%s: %w; last answer: %s", c.URL, path, ctx.Err(), last)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// probe returns "" when GET path answers 200, and otherwise what it got.
func (c *Cluster) probe(ctx context.Context, client *http.Client, path string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+c.tokens[Admin])
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return resp.Status + ": " + strings.TrimSpace(body.String())
}

// stop ends the processes in the reverse order of their start, so that
// kube-apiserver shuts down while etcd still answers: each gets SIGTERM, then
// SIGKILL if it has not exited after a grace period. It returns every
// unexpected error.
func (c *Cluster) stop() error {
	var errs []error
	for _, p := range slices.Backward(c.procs) {
		if err := p.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if c.spawner != nil {
		c.spawner.close()
	}
	return errors.Join(errs...)
}

// logTails writes the end of each process's log to t's output.
func (c *Cluster) logTails(t testing.TB) {
	t.Helper()
	for _, p := range c.procs {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Logf("kubetest: read %s log: %v", p.name, err)
			continue
		}
		const max = 8 << 10
		if len(b) > max {
			b = b[len(b)-max:]
		}
		t.Logf("kubetest: end of %s log (%s):\n%s", p.name, p.logPath, b)
	}
}

// binDir finds the directory holding the control plane's binaries and checks
// that they are all there.
func binDir() (string, error) {
	dir := os.Getenv(EnvBin)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("find etcd and kube-apiserver: %w; or set %s", err, EnvBin)
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s is missing from %s: %s", name, dir, buildHint)
		}
	}
	return dir, nil
}

// repoRoot walks up from the working directory (a test's package directory)
// to the directory whose go.mod declares Bindery's module.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(b, modulePath) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s", modulePath, wd)
		}
	}
}

func declaresModule(gomod []byte, path string) bool {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == path
		}
	}
	return false
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
// All listeners stay open until every port is chosen, so none repeats.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeKubeconfig writes a kubeconfig for user to path.
func (c *Cluster) writeKubeconfig(user, path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthority: c.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: c.tokens[user]}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return nil
}

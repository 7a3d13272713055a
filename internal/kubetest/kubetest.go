// Package kubetest starts a real Kubernetes control plane — etcd and
// kube-apiserver, built by tools/kube/build.sh into ./bin — for one test, on
// free loopback ports, with static bearer tokens and RBAC.
//
// Nothing else of a cluster runs unless a test asks for it. kube-controller-manager
// runs only with WithControllerManager, and then only the controllers named
// there (by default clusterrole-aggregation alone); without the others there
// are no default ServiceAccounts, no garbage collection by ownerReference, and
// deleted namespaces stay Terminating. No scheduler and no kubelet run, so
// Pods stay Pending, unless the test asks for a node with WithNode: then
// containerd, a kubelet and kube-scheduler run too, and Pods really run. See
// DESIGN.md, "Kubernetes for tests" and "A real node in tests".
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
// etcd, kube-apiserver, kubectl and kube-controller-manager (default: bin/ at
// the repository root).
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
	users             []User
	flags             []string
	controllerManager bool
	controllers       []string
	node              bool
	inClusterAPI      bool
}

// defaultControllers are what WithControllerManager runs when given no names.
var defaultControllers = []string{"clusterrole-aggregation"}

// WithUser adds a user with its own bearer token and the given groups, on top
// of Admin, Alice and Bob. The token file is read once at start-up, so every
// user a test needs must be named here.
func WithUser(name string, groups ...string) Option {
	return func(o *options) { o.users = append(o.users, User{Name: name, Groups: groups}) }
}

// WithAPIServerFlags sets flags ("--name=value") on kube-apiserver's
// command line, in place of Start's value for the same flag, if any (for
// example "--bind-address=0.0.0.0" for a server in a network namespace, or
// "--disable-admission-plugins=" to turn none off).
func WithAPIServerFlags(flags ...string) Option {
	return func(o *options) { o.flags = append(o.flags, flags...) }
}

// WithControllerManager also starts kube-controller-manager, once
// kube-apiserver is ready, running only the named controllers: the values of
// its --controllers flag, such as "clusterrole-aggregation", "namespace" or
// "garbagecollector". With no names it runs clusterrole-aggregation alone,
// which merges ClusterRoles labelled
// rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}: "true" into the
// built-in admin, edit and view roles. Start returns once the controllers are
// set up; they may still be filling their caches, so a test polls for their
// effect.
func WithControllerManager(controllers ...string) Option {
	return func(o *options) {
		o.controllerManager = true
		o.controllers = append(o.controllers, controllers...)
	}
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
	// EtcdURL is etcd's client address, http://127.0.0.1:PORT, for a test
	// that looks at what kube-apiserver stored.
	EtcdURL string
	// StartupTime is how long the control plane took to become ready,
	// kube-controller-manager included when it runs.
	StartupTime time.Duration

	// controllerManagerTime is how long kube-controller-manager took to set
	// up its controllers once kube-apiserver was ready (0 when it does not run).
	controllerManagerTime time.Duration

	bin         string
	dir         string
	users       map[string]User
	tokens      map[string]string
	kubeconfigs map[string]string
	procs       []*process
	spawner     *spawner
	node        *Node // nil without WithNode
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
	if n := c.node; n != nil {
		t.Logf("kubetest: node %s Ready in %s (directory %s)", n.Name, n.StartupTime.Round(time.Millisecond), n.Dir)
	}
	if c.controllerManagerTime > 0 {
		t.Logf("kubetest: control plane at %s ready in %s, of which kube-controller-manager %s",
			c.URL, c.StartupTime.Round(time.Millisecond), c.controllerManagerTime.Round(time.Millisecond))
	} else {
		t.Logf("kubetest: control plane at %s ready in %s", c.URL, c.StartupTime.Round(time.Millisecond))
	}
	return c
}

// PID is the process id of the control-plane program name
// ("kube-apiserver", "etcd"), for a test that measures it; 0 when the
// cluster runs none.
func (c *Cluster) PID(name string) int {
	for _, p := range c.procs {
		if p.name == name {
			return p.cmd.Process.Pid
		}
	}
	return 0
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

// KubectlCommand returns bin/kubectl as user with args, not started, for
// what runs until stopped (kubectl get -w). It is killed when ctx ends.
func (c *Cluster) KubectlCommand(ctx context.Context, user string, args ...string) *exec.Cmd {
	return kubectlCommand(ctx, c.bin, c.dir, c.KubeconfigFor(user), args...)
}

func kubectlCommand(ctx context.Context, bin, home, kubeconfig string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	// Keep kubectl's caches and plugins away from the developer's home.
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "kubectl-cache"))
	return cmd
}

func (c *Cluster) kubectl(ctx context.Context, user string, stdin []byte, args ...string) (string, error) {
	return runKubectl(c.KubectlCommand(ctx, user, args...), stdin, args)
}

// Kubectl runs bin/kubectl against another server than a Cluster (Bindery's
// standalone API server) with kubeconfig and args, stdin (which may be
// nil) as its input and its caches under home. It returns kubectl's
// standard output; the error includes its standard error.
func Kubectl(ctx context.Context, home, kubeconfig string, stdin []byte, args ...string) (string, error) {
	bin, err := binDir(false, false)
	if err != nil {
		return "", err
	}
	return runKubectl(kubectlCommand(ctx, bin, home, kubeconfig, args...), stdin, args)
}

func runKubectl(cmd *exec.Cmd, stdin []byte, args []string) (string, error) {
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
	named := len(o.controllers) // those the test asked for
	if o.inClusterAPI {
		o.node = true
	}
	if o.node {
		o.controllerManager = true
		if named == 0 {
			o.controllers = append(o.controllers, defaultControllers...)
		}
		o.controllers = append(o.controllers, nodeControllers...)
		if o.inClusterAPI {
			o.controllers = append(o.controllers, inClusterControllers...)
		}
		o.users = append(o.users, nodeUser())
	}
	bin, err := binDir(o.controllerManager, o.node)
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

	// etcd client and peer, kube-apiserver, kube-controller-manager,
	// kube-scheduler, the kubelet and its healthz.
	ports, err := freePorts(7)
	if err != nil {
		return nil, err
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	c.EtcdURL = etcdClient

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
	if o.node {
		nodeFlags, err := c.prepareNode(ports[5:7])
		if err != nil {
			return c, err
		}
		args = setFlags(args, nodeFlags...)
	}
	if o.inClusterAPI {
		// Every interface: the node's address does not exist yet.
		args = setFlags(args, "--bind-address=0.0.0.0", "--disable-admission-plugins=")
	}
	if _, err := c.spawn("kube-apiserver", setFlags(args, o.flags...)...); err != nil {
		return c, err
	}
	if err := c.waitReady(ctx); err != nil {
		return c, err
	}
	if o.controllerManager {
		controllers := o.controllers
		if len(controllers) == 0 {
			controllers = defaultControllers
		}
		if err := c.startControllerManager(ctx, ports[3], pki, controllers); err != nil {
			return c, err
		}
	}
	if o.node {
		if err := c.startScheduler(ctx, ports[4], pki); err != nil {
			return c, err
		}
		if err := c.node.start(ctx); err != nil {
			return c, fmt.Errorf("node: %w", err)
		}
	}
	c.StartupTime = time.Since(began)
	return c, nil
}

// startControllerManager starts kube-controller-manager with controllers,
// serving on port, and waits until it has set them up.
func (c *Cluster) startControllerManager(ctx context.Context, port int, pki files, controllers []string) error {
	began := time.Now()
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	if _, err := c.spawn("kube-controller-manager",
		// Admin's kubeconfig: as a member of system:masters, every controller a
		// test names can do its work. A real cluster gives each controller its
		// own ServiceAccount (--use-service-account-credentials), which needs
		// the serviceaccount-token controller running first; tests here check
		// Bindery's RBAC, not the controllers'.
		"--kubeconfig="+c.kubeconfigs[Admin],
		"--controllers="+strings.Join(controllers, ","),
		// What root-ca-certificate-publisher-controller puts in every
		// namespace's kube-root-ca.crt, which Pods' service account
		// volumes carry.
		"--root-ca-file="+c.CAFile,
		// One instance per cluster: nothing to elect, and no Lease to wait for.
		"--leader-elect=false",
		// Served only so that Start can read /healthz, which needs no
		// credentials (--authorization-always-allow-paths): without
		// --authentication-kubeconfig it warns that it authenticates nobody,
		// and that is all it needs. The API server's certificate names
		// 127.0.0.1 too, so the cluster's CA verifies it.
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+pki.serving.cert,
		"--tls-private-key-file="+pki.serving.key,
		"--profiling=false",
	); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := c.httpClient()
	defer client.CloseIdleConnections()
	healthz := url + "/healthz?verbose"
	err := c.poll(ctx, healthz, func(ctx context.Context) string {
		status, body, err := get(ctx, client, healthz, "")
		if answer := notOK(status, body, err); answer != "" {
			return answer
		}
		// /healthz answers 200 from the start, with only a "ping" check; the
		// controller manager adds one check per controller once it has built
		// them all, just before it starts them.
		if !listsControllers(body) {
			return "no controller checks yet: " + strings.TrimSpace(body)
		}
		return ""
	})
	if err != nil {
		return err
	}
	c.controllerManagerTime = time.Since(began)
	return nil
}

// startScheduler starts kube-scheduler, serving on port, and waits until
// it answers /healthz.
func (c *Cluster) startScheduler(ctx context.Context, port int, pki files) error {
	if _, err := c.spawn("kube-scheduler",
		// Admin's kubeconfig, as for kube-controller-manager.
		"--kubeconfig="+c.kubeconfigs[Admin],
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+pki.serving.cert,
		"--tls-private-key-file="+pki.serving.key,
		"--profiling=false",
	); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := c.httpClient()
	defer client.CloseIdleConnections()
	healthz := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return c.poll(ctx, healthz, func(ctx context.Context) string {
		return notOK(get(ctx, client, healthz, ""))
	})
}

// setFlags sets each "--name=value" of flags in args, in place of the value
// args has for it, if any: kube-apiserver takes some flags (such as
// --authorization-mode) as lists, where a repeat would add, not override.
func setFlags(args []string, flags ...string) []string {
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, name+"=") })
		if i < 0 {
			args = append(args, f)
		} else {
			args[i] = f
		}
	}
	return args
}

// listsControllers reports whether a verbose /healthz answer lists a passed
// check other than the default "ping".
func listsControllers(body string) bool {
	for line := range strings.Lines(body) {
		if name, ok := strings.CutPrefix(line, "[+]"); ok && !strings.HasPrefix(name, "ping ") {
			return true
		}
	}
	return false
}

// waitReady polls /readyz as Admin until it answers 200, then waits for the
// "default" namespace, which the API server creates shortly after.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := c.httpClient()
	defer client.CloseIdleConnections()
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		url := c.URL + path
		if err := c.poll(ctx, url, func(ctx context.Context) string {
			return notOK(get(ctx, client, url, c.tokens[Admin]))
		}); err != nil {
			return err
		}
	}
	return nil
}

// poll calls check every 50 ms until it returns "", which means that target
// is ready, or ctx ends, or one of the cluster's processes exits. Otherwise
// check returns what it got, for the error.
func (c *Cluster) poll(ctx context.Context, target string, check func(context.Context) string) error {
	for {
		last := check(ctx)
		if last == "" {
			return nil
		}
		for _, p := range c.procs {
			select {
			case <-p.done:
				err := fmt.Errorf("%s exited while waiting for %s: %w (log: %s)", p.name, target, p.err, p.logPath)
				if log, _ := os.ReadFile(p.logPath); bytes.Contains(log, []byte("address already in use")) {
					err = fmt.Errorf("%w: %w", errPortTaken, err)
				}
				return err
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w; last answer: %s", target, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// httpClient returns a client that trusts the cluster's CA.
func (c *Cluster) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   5 * time.Second,
	}
}

// get does GET url, with token as the bearer token unless it is empty, and
// returns the status code and body.
func get(ctx context.Context, client *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	return resp.StatusCode, body.String(), err
}

// notOK returns "" for a 200 answer, and otherwise what was got instead.
func notOK(status int, body string, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case status != http.StatusOK:
		return strconv.Itoa(status) + " " + http.StatusText(status) + ": " + strings.TrimSpace(body)
	}
	return ""
}

// stop ends the processes in the reverse order of their start, so that
// kube-controller-manager shuts down while kube-apiserver still answers, and
// kube-apiserver while etcd does: each gets SIGTERM, then SIGKILL if it has
// not exited after a grace period. It returns every unexpected error.
func (c *Cluster) stop() error {
	var errs []error
	if c.node != nil {
		// While kube-apiserver still runs: the Pods are deleted through it.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		if err := c.node.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node: %w", err))
		}
		cancel()
	}
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
	procs := c.procs
	if n := c.node; n != nil {
		for _, p := range []*process{n.containerd, n.kubelet} {
			if p != nil {
				procs = append(procs, p)
			}
		}
	}
	for _, p := range procs {
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
// that those the cluster will run are there: kube-controller-manager only
// when controllerManager is set, the kubelet and kube-scheduler only with a
// node.
func binDir(controllerManager, node bool) (string, error) {
	dir := os.Getenv(EnvBin)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("find etcd and kube-apiserver: %w; or set %s", err, EnvBin)
		}
		dir = filepath.Join(root, "bin")
	}
	names := []string{"etcd", "kube-apiserver", "kubectl"}
	if controllerManager {
		names = append(names, "kube-controller-manager")
	}
	if node {
		names = append(names, "kubelet", "kube-scheduler")
	}
	for _, name := range names {
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

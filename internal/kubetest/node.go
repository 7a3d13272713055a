package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/bindery-dev/bindery/internal/pki"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/internal/ociimage"
)

// The node's fixed names and address ranges. The Pod and Service ranges lie
// in 198.18.0.0/15, which RFC 2544 sets aside for benchmarking, so they cannot
// collide with a network the machine really uses.
const (
	// NodeName is the name of the node WithNode adds.
	NodeName = "kubetest-node"
	// NodeIP is the node's address, on a link of the host: Pods reach the
	// host there, and kube-apiserver accepts it as an endpoint (unlike a
	// loopback address), so a server of the test listening on it can sit
	// behind a Service.
	NodeIP = "198.18.1.1"
	// PauseImage is the sandbox image of every Pod on the node.
	PauseImage = "bindery.test/pause:1"
	// BusyboxImage is a test image with a static busybox: sh, cat, sleep
	// and the rest of its applets are in /bin. Pods use it with
	// imagePullPolicy: Never, as there is no registry.
	BusyboxImage = "bindery.test/busybox:1"
	// DevicePluginDir is where the kubelet serves kubelet.sock for device
	// plugins; it does not follow the kubelet's root directory.
	DevicePluginDir = "/var/lib/kubelet/device-plugins"

	podCIDR     = "198.18.0.0/24"
	testBlock   = "198.18.0.0/15"
	serviceCIDR = "198.19.0.0/16"
	// bridgeName is the CNI bridge; at most 15 bytes (IFNAMSIZ).
	bridgeName = "bindery-kt0"
	// nodeLink carries NodeIP, the node's address: the kubelet refuses a
	// loopback one, and kube-apiserver reaches the kubelet's API there.
	// It is a bridge with no ports, as this kernel may lack the dummy
	// link type.
	nodeLink = "bindery-ktn"
	// cgroupRoot holds every cgroup the kubelet creates, so teardown removes
	// one tree.
	cgroupRoot = "/bindery-kubetest"
	// lockPath serialises the nodes of every test on the machine: the
	// kubelet and containerd use host paths that no option moves.
	lockPath = "/run/lock/bindery-kubetest-node.lock"
	// statePath keeps the host's state from before a node started, until
	// its teardown has restored it: when a test binary is killed before
	// its cleanups run, the next node restores what that one changed.
	statePath = "/run/lock/bindery-kubetest-node.state"

	nodeReadyTimeout = 2 * time.Minute
	lockTimeout      = 15 * time.Minute
	drainTimeout     = 90 * time.Second
)

// nodeControllers are what kube-controller-manager runs beside the node, so
// that Deployments and DaemonSets get their Pods, deleted owners take their
// dependents along, and the node loses the not-ready taint the kubelet
// registers it with (nodelifecycle).
var nodeControllers = []string{"deployment", "replicaset", "daemonset", "garbagecollector", "namespace", "nodelifecycle"}

// WithNode adds a node that really runs Pods: containerd and a kubelet on
// this machine, with kube-scheduler and kube-controller-manager (running
// the deployment, replicaset, daemonset, garbagecollector, namespace and
// nodelifecycle controllers on top of any named with WithControllerManager). Pods run
// BusyboxImage (or an image imported with Node.ImportImage) with
// imagePullPolicy: Never, get an address in 198.18.0.0/24 from a CNI
// bridge, with a route through it to the rest of 198.18.0.0/15 (so they
// reach the host's addresses there, NodeIP among them), and can be reached
// with kubectl exec and logs.
//
// The node needs root, cgroups, and the Debian packages containerd, runc,
// containernetworking-plugins and busybox-static (`make deps`). Only one node
// runs on a machine at a time: Start waits for a lock file. Teardown deletes
// the Pods while the kubelet still runs, then restores what the node changed
// on the host (sysctls, the bridge, mounts, cgroups, directories); a test
// that needs no node should not ask for one, as it costs seconds.
func WithNode() Option {
	return func(o *options) { o.node = true }
}

// inClusterControllers are what kube-controller-manager also runs with
// WithInClusterAPI: every namespace gets its default ServiceAccount and the
// kube-root-ca.crt ConfigMap Pods' token volumes need, Services get the
// endpoints that the aggregation layer and admission webhooks are routed to
// (--enable-aggregator-routing), and PodDisruptionBudgets their status.
var inClusterControllers = []string{"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"endpoints-controller", "endpointslice-controller", "disruption-controller"}

// WithInClusterAPI is WithNode for Pods that use the Kubernetes API from
// inside, as in a real cluster: the ServiceAccount admission plugin is on
// (so Pods get projected service account tokens and the cluster's CA),
// the controllers that serve it run (inClusterControllers), and
// kube-apiserver listens on every interface, NodeIP included. No
// kube-proxy runs, so the kubernetes Service's ClusterIP leads nowhere:
// give the Pods Node.InClusterEnv, which points client-go's in-cluster
// configuration at NodeIP. Pods must name a ServiceAccount that exists (or
// the namespace's default).
func WithInClusterAPI() Option {
	return func(o *options) { o.inClusterAPI = true }
}

// Node is the node started by WithNode.
type Node struct {
	// Name is the Node object's name (NodeName).
	Name string
	// Dir holds containerd's and the kubelet's state, sockets and logs.
	Dir string
	// StartupTime is how long the node took to become Ready once the
	// control plane was, images and containerd included.
	StartupTime time.Duration
	// CNIBinDir and CNIConfDir are the node's own CNI directories, as
	// containerd's bin_dir and conf_dir: the reference plugins are linked
	// into CNIBinDir, and CNIConfDir holds the conflist, which containerd
	// reloads when it changes. A test may add a plugin to both.
	CNIBinDir, CNIConfDir string

	c              *Cluster
	containerdSock string
	containerd     *process
	kubelet        *process
	kubeletArgs    []string
	lock           *os.File
	host           *hostState
	kubeletClient  keyPair // the API server's client certificate for the kubelet
	kubeletCA      string  // verifies it
	kubeletPort    int
	healthzPort    int
}

// Node returns the cluster's node, or nil without WithNode.
func (c *Cluster) Node() *Node { return c.node }

// InClusterEnv are the variables that point client-go's in-cluster
// configuration (rest.InClusterConfig) at kube-apiserver on NodeIP, in
// place of the kubernetes Service's ClusterIP: with WithInClusterAPI, give
// them to every container that uses the API.
func (n *Node) InClusterEnv() map[string]string {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(n.c.URL, "https://"))
	return map[string]string{"KUBERNETES_SERVICE_HOST": NodeIP, "KUBERNETES_SERVICE_PORT": port}
}

// prepareNode does what the node needs before kube-apiserver starts: a
// user for the kubelet, a client certificate for kube-apiserver to present
// to the kubelet, and the flags for both.
func (c *Cluster) prepareNode(ports []int) ([]string, error) {
	dir, err := os.MkdirTemp("", "ktnode")
	if err != nil {
		return nil, fmt.Errorf("node directory: %w", err)
	}
	n := &Node{Name: NodeName, Dir: dir, c: c, kubeletPort: ports[0], healthzPort: ports[1]}
	c.node = n
	ca, err := pki.NewCA("kubetest-kubelet-client-ca", validity)
	if err != nil {
		return nil, err
	}
	n.kubeletCA = filepath.Join(dir, "kubelet-client-ca.crt")
	if err := pki.WriteFile(n.kubeletCA, ca.CertPEM(), 0o600); err != nil {
		return nil, err
	}
	client, err := ca.Issue(pki.Spec{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"},
		Usage: pki.Client, Validity: validity,
	})
	if err != nil {
		return nil, err
	}
	n.kubeletClient = keyPair{cert: filepath.Join(dir, "kubelet-client.crt"), key: filepath.Join(dir, "kubelet-client.key")}
	if err := client.Write(n.kubeletClient.cert, n.kubeletClient.key); err != nil {
		return nil, err
	}
	return []string{
		// The Node authorizer gives the kubelet what a node needs: its own
		// Node and Lease, and the Secrets and ConfigMaps of its Pods.
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--kubelet-client-certificate=" + n.kubeletClient.cert,
		"--kubelet-client-key=" + n.kubeletClient.key,
		"--kubelet-preferred-address-types=InternalIP",
	}, nil
}

// nodeUser is the identity the kubelet authenticates as.
func nodeUser() User {
	return User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}}
}

// start brings up containerd and the kubelet and waits until the Node is
// Ready. On error, stop undoes what was done.
func (n *Node) start(ctx context.Context) error {
	began := time.Now()
	lock, err := acquireLock(ctx, lockPath, lockTimeout)
	if err != nil {
		return err
	}
	n.lock = lock
	if err := noOtherKubelet(); err != nil {
		return err
	}
	n.host, err = recoverHost(ctx, n.Dir)
	if err != nil {
		return err
	}
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	images, err := n.writeImages(ctx)
	if err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	for _, img := range images {
		if err := n.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	if err := addNodeLink(ctx); err != nil {
		return err
	}
	if err := forwardBridge(ctx, true); err != nil {
		return err
	}
	if err := n.startKubelet(); err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	n.StartupTime = time.Since(began)
	return nil
}

// acquireLock takes an exclusive flock on path, waiting up to timeout for
// the node of another test to go.
func acquireLock(ctx context.Context, path string, timeout time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("node lock directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := flock(f)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, errLocked) {
			f.Close()
			return nil, fmt.Errorf("node lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("node lock %s: another test's node still runs: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// noOtherKubelet fails when a kubelet this package did not start serves
// the device-plugin directory: the node would take it over.
func noOtherKubelet() error {
	conn, err := net.DialTimeout("unix", filepath.Join(DevicePluginDir, "kubelet.sock"), time.Second)
	if err != nil {
		return nil
	}
	conn.Close()
	return fmt.Errorf("a kubelet already serves %s on this machine; the test node would take its place", DevicePluginDir)
}

// writeImages builds the pause and busybox images into the node's
// directory and returns their tarballs.
func (n *Node) writeImages(ctx context.Context) ([]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	pause := filepath.Join(n.Dir, "pause")
	if err := ociimage.BuildStatic(ctx, root, "./tools/pause", pause); err != nil {
		return nil, err
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian's busybox-static, installed by make deps): %w", err)
	}
	bb, err := ociimage.Busybox(ctx, busybox)
	if err != nil {
		return nil, err
	}
	var tarballs []string
	for _, img := range []struct {
		ref  string
		spec ociimage.Spec
	}{{PauseImage, ociimage.Pause(pause)}, {BusyboxImage, bb}} {
		built, err := ociimage.Build(img.spec)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.ref, err)
		}
		file := filepath.Join(n.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.ref)+".tar")
		if err := ociimage.WriteFile(file, img.ref, built); err != nil {
			return nil, err
		}
		tarballs = append(tarballs, file)
	}
	return tarballs, nil
}

// ImportImage loads an image tarball (as internal/ociimage writes) into the
// node's containerd, where Pods with imagePullPolicy: Never find it.
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	if _, err := n.ctr(ctx, "images", "import", tarball); err != nil {
		return fmt.Errorf("import image %s: %w", tarball, err)
	}
	return nil
}

// ctr runs containerd's ctr against the node's containerd in the CRI's
// namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.containerdSock, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// startContainerd writes containerd's configuration and the CNI conflist,
// starts containerd, and waits until it answers.
func (n *Node) startContainerd(ctx context.Context) error {
	d := func(p ...string) string { return filepath.Join(append([]string{n.Dir, "containerd"}, p...)...) }
	n.CNIBinDir, n.CNIConfDir = d("cni-bin"), d("net.d")
	for _, dir := range []string{d(), n.CNIConfDir, n.CNIBinDir, d("cni-ipam")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("containerd directory: %w", err)
		}
	}
	n.containerdSock = d("containerd.sock")
	conflist := map[string]any{
		// The newest version containerd 1.6's CNI library speaks.
		"cniVersion": "1.0.0",
		"name":       "kubetest",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      bridgeName,
			"isGateway":   true,
			"ipMasq":      false, // no iptables rules: Pods talk to the node only
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
				// Pods reach the host's addresses in the test block (the
				// node's, and those a test adds) through the bridge.
				"routes":  []map[string]string{{"dst": testBlock}},
				"dataDir": d("cni-ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return fmt.Errorf("cni conflist: %w", err)
	}
	if err := os.WriteFile(filepath.Join(n.CNIConfDir, "10-kubetest.conflist"), b, 0o644); err != nil {
		return fmt.Errorf("cni conflist: %w", err)
	}
	if err := linkCNIPlugins(n.CNIBinDir); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # Without CAP_SYS_RESOURCE (as in a container), runc cannot lower the
  # OOM score adjustment, and every sandbox would fail to start.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
    max_conf_num = 1

[plugins."io.containerd.internal.v1.opt"]
  path = %[9]q
`, d("root"), d("state"), n.containerdSock, d("ttrpc.sock"), PauseImage, d("runc"), n.CNIBinDir, n.CNIConfDir, d("opt"))
	if err := os.WriteFile(d("config.toml"), []byte(config), 0o644); err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	path, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("containerd (installed by make deps): %w", err)
	}
	n.containerd, err = n.c.startProcess("containerd", path, "--config", d("config.toml"), "--log-level", "warn")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := n.ctr(ctx, "version")
		if err == nil {
			return nil
		}
		select {
		case <-n.containerd.done:
			return fmt.Errorf("containerd exited: %w (log: %s)", n.containerd.err, n.containerd.logPath)
		case <-ctx.Done():
			return fmt.Errorf("wait for containerd: %w: %w", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cniBinDir finds the reference CNI plugins (Debian's
// containernetworking-plugins installs them in /usr/lib/cni).
func cniBinDir() (string, error) {
	for _, dir := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin: install containernetworking-plugins (make deps)")
}

// linkCNIPlugins links the system's reference CNI plugins into dir, the
// node's own plugin directory, so that a test can add plugins there
// without touching the system's.
func linkCNIPlugins(dir string) error {
	sys, err := cniBinDir()
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(sys)
	if err != nil {
		return fmt.Errorf("CNI plugins: %w", err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(sys, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("CNI plugins: %w", err)
		}
	}
	return nil
}

// startKubelet writes the kubelet's kubeconfig and configuration and
// starts it.
func (n *Node) startKubelet() error {
	d := func(p ...string) string { return filepath.Join(append([]string{n.Dir, "kubelet"}, p...)...) }
	if err := os.MkdirAll(d("pods-logs"), 0o755); err != nil {
		return fmt.Errorf("kubelet directory: %w", err)
	}
	user := nodeUser().Name
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := n.c.writeKubeconfig(user, kubeconfig); err != nil {
		return err
	}
	config := map[string]any{
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"kind":               "KubeletConfiguration",
		"address":            NodeIP,
		"port":               n.kubeletPort,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        n.healthzPort,
		// Only kube-apiserver, with the certificate prepareNode made, may
		// use the kubelet's API (exec, logs).
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": n.kubeletCA},
		},
		"authorization":            map[string]any{"mode": "AlwaysAllow"},
		"containerRuntimeEndpoint": "unix://" + n.containerdSock,
		// What this kind of machine needs (DESIGN.md, "A real node in tests").
		"cgroupDriver":           "cgroupfs",
		"cgroupRoot":             cgroupRoot,
		"failCgroupV1":           false,
		"failSwapOn":             false,
		"makeIPTablesUtilChains": false,
		"podLogsDir":             d("pods-logs"),
		"resolvConf":             "",
		"clusterDomain":          "cluster.local",
		// The machine's disk and memory are shared: never evict the
		// test's Pods because of what others use, and never collect
		// its images.
		"evictionHard": map[string]string{
			"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Status and Pod changes reach the API server quickly, so tests
		// poll less.
		"nodeStatusUpdateFrequency": "1s",
		"nodeStatusReportFrequency": "1s",
		"syncFrequency":             "5s",
		"fileCheckFrequency":        "5s",
		"shutdownGracePeriod":       "0s",
		"serializeImagePulls":       false,
		"registerNode":              true,
		"maxPods":                   110,
	}
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	if err := os.WriteFile(d("config.json"), b, 0o644); err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	n.kubeletArgs = []string{
		"--config=" + d("config.json"),
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + d("root"),
		"--cert-dir=" + d("pki"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
		"--v=1",
	}
	return n.runKubelet()
}

func (n *Node) runKubelet() error {
	var err error
	n.kubelet, err = n.c.startProcess("kubelet", filepath.Join(n.c.bin, "kubelet"), n.kubeletArgs...)
	return err
}

// RestartKubelet stops the kubelet and starts it again, as an upgrade or a
// crash does; the Pods keep running. It returns when the new kubelet has
// started, not when it is ready: device plugins re-register from then on.
func (n *Node) RestartKubelet(t testing.TB) {
	t.Helper()
	if err := n.kubelet.stop(stopGrace); err != nil {
		t.Fatalf("kubetest: stop kubelet: %v", err)
	}
	if err := n.runKubelet(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
}

// addNodeLink creates nodeLink with NodeIP.
func addNodeLink(ctx context.Context) error {
	for _, args := range [][]string{
		{"link", "add", nodeLink, "type", "bridge"},
		{"address", "add", NodeIP + "/32", "dev", nodeLink},
		{"link", "set", nodeLink, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// waitReady polls the Node until its Ready condition is True and it has no
// NoSchedule taint left (the kubelet registers it with
// node.kubernetes.io/not-ready, which nodelifecycle removes).
func (n *Node) waitReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.c.Config())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	last := "no Node yet"
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			last = "Ready condition missing"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					last = "Ready " + string(c.Status) + ": " + c.Message
					if c.Status != corev1.ConditionTrue {
						break
					}
					last = ""
					for _, taint := range node.Spec.Taints {
						if taint.Effect == corev1.TaintEffectNoSchedule {
							last = "tainted " + taint.ToString()
						}
					}
					if last == "" {
						return nil
					}
				}
			}
		default:
			last = err.Error()
		}
		select {
		case <-n.kubelet.done:
			return fmt.Errorf("kubelet exited: %w (log: %s)", n.kubelet.err, n.kubelet.logPath)
		case <-n.containerd.done:
			return fmt.Errorf("containerd exited: %w (log: %s)", n.containerd.err, n.containerd.logPath)
		case <-ctx.Done():
			return fmt.Errorf("wait for node %s to be Ready: %w; last: %s", n.Name, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

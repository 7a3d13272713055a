package cni_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/bindery-dev/bindery/internal/netnstest"
	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/bindery-dev/bindery/internal/version"
	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// specVersions are the CNI spec versions every chain test runs under.
var specVersions = []string{"0.4.0", "1.0.0", "1.1.0"}

var (
	pluginsOnce sync.Once
	pluginsDir  string // bindery-cni, freshly built
	refDir      string // bridge and host-local
	pluginsErr  error
)

// testVersion is the version the tests build bindery-cni as.
const testVersion = "v0.0.0-cnitest"

// buildPlugins builds bindery-cni from this tree and the reference plugins
// (tools/cni/build.sh, which does nothing when they are up to date).
func buildPlugins(t testing.TB) (binderyDir, referenceDir string) {
	t.Helper()
	pluginsOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			pluginsErr = err
			return
		}
		refDir = filepath.Join(root, "bin", "cni")
		cmd := exec.Command(filepath.Join(root, "tools", "cni", "build.sh"))
		cmd.Env = append(os.Environ(), "BINDERY_CNI_BIN="+refDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginsErr = fmt.Errorf("tools/cni/build.sh: %w: %s", err, out)
			return
		}
		pluginsDir, err = os.MkdirTemp("", "bindery-cni-test-")
		if err != nil {
			pluginsErr = err
			return
		}
		// Static, as make build and the image build it.
		build := exec.Command("go", "build", "-ldflags", "-X "+version.LinkerVariable+"="+testVersion,
			"-o", filepath.Join(pluginsDir, cni.PluginType), "github.com/bindery-dev/bindery/cmd/bindery-cni")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			pluginsErr = fmt.Errorf("go build bindery-cni: %w: %s", err, out)
		}
	})
	if pluginsErr != nil {
		t.Fatal(pluginsErr)
	}
	return pluginsDir, refDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginsDir != "" {
		os.RemoveAll(pluginsDir)
	}
	os.Exit(code)
}

// lab is a bridge network for Pods on the host, and around it, each in its
// own namespace from netnstest: a service inside the managed ranges that
// listens on two ports, a second service inside them, and a server outside
// them.
type lab struct {
	t           testing.TB
	cni         *libcni.CNIConfig
	cacheDir    string
	stateDir    string
	dataDir     string
	bridge      string
	podSubnet   netip.Prefix
	gateway     netip.Addr
	managed     []netip.Prefix
	svc         *netnstest.Namespace
	svcPorts    [2]int // both listening on svc.IP
	other       *netnstest.Namespace
	otherPort   int
	outside     *netnstest.Namespace
	outsidePort int
	netName     string
	forwarding  []string // sysctl paths set to 1
}

// setup builds the lab; without root it skips the test (fails it in CI).
func setup(t testing.TB) *lab {
	t.Helper()
	roottest.Require(t, "CNI tests (network namespaces, bridges and nftables tables)")
	bdir, rdir := buildPlugins(t)
	tmp := t.TempDir()
	l := &lab{
		t:        t,
		cacheDir: filepath.Join(tmp, "cache"),
		stateDir: filepath.Join(tmp, "state"),
		dataDir:  filepath.Join(tmp, "ipam"),
		bridge:   fmt.Sprintf("bnd%08x", rand.Uint32()),
		netName:  fmt.Sprintf("bindery-test-%08x", rand.Uint32()),
	}
	l.cni = libcni.NewCNIConfigWithCacheDir([]string{bdir, rdir}, l.cacheDir, nil)
	l.svc = netnstest.New(t)
	l.other = netnstest.New(t)
	l.outside = netnstest.New(t)
	l.managed = []netip.Prefix{netip.PrefixFrom(l.svc.IP, 30).Masked(), netip.PrefixFrom(l.other.IP, 30).Masked()}
	l.podSubnet = freeSubnet(t)
	l.gateway = l.podSubnet.Addr().Next()

	// The Pods' gateway is the host: the bridge gets the gateway address
	// here, not from the bridge plugin (isGateway would switch on
	// forwarding for the whole host), and forwarding is switched on only
	// for the interfaces the lab made.
	mustRun(t, "ip", "link", "add", l.bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", l.bridge).Run() })
	mustRun(t, "ip", "addr", "add", netip.PrefixFrom(l.gateway, l.podSubnet.Bits()).String(), "dev", l.bridge)
	mustRun(t, "ip", "link", "set", l.bridge, "up")
	// On a host whose FORWARD policy is DROP, with br_netfilter passing
	// bridged frames through iptables (as Docker leaves a machine), the
	// host forwards nothing for the lab's Pods unless told: the lab
	// accepts what crosses its bridge, as a cluster's network plugin (or
	// the reference firewall plugin) does for its Pods, and removes its
	// rules afterwards. bindery-cni's own rules are in the Pods'
	// namespaces, unaffected.
	for _, dir := range []string{"-i", "-o"} {
		rule := []string{"FORWARD", dir, l.bridge, "-m", "comment", "--comment", "bindery-cni test lab", "-j", "ACCEPT"}
		mustRun(t, "iptables", append([]string{"-w", "-I"}, rule...)...)
		t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).Run() })
	}
	l.forwarding = []string{l.bridge}
	for _, n := range []*netnstest.Namespace{l.svc, l.other, l.outside} {
		l.forwarding = append(l.forwarding, hostDev(t, n.IP))
		mustRun(t, "ip", "-n", n.Name, "route", "add", l.podSubnet.String(), "via", n.HostIP.String())
	}

	l.forwardAll()

	p1, p2 := serve(t, l.svc, "tcp"), serve(t, l.svc, "tcp")
	l.svcPorts = [2]int{p1, p2}
	l.otherPort = serve(t, l.other, "tcp")
	l.outsidePort = serve(t, l.outside, "tcp")
	return l
}

// forwardAll switches on IPv4 forwarding for packets that arrive on the
// lab's interfaces, and only those.
func (l *lab) forwardAll() {
	l.t.Helper()
	for _, dev := range l.forwarding {
		path := "/proc/sys/net/ipv4/conf/" + dev + "/forwarding"
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			l.t.Fatalf("enable forwarding on %s: %v", dev, err)
		}
	}
}

// conflist is the chain bridge → bindery-cni under spec version v; without
// bindery it is the bridge alone.
func (l *lab) conflist(v string, bindery bool) *libcni.NetworkConfigList {
	l.t.Helper()
	plugins := []map[string]any{{
		"type":      "bridge",
		"bridge":    l.bridge,
		"isGateway": false,
		"ipMasq":    false,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": l.dataDir,
			"ranges":  [][]map[string]any{{{"subnet": l.podSubnet.String(), "gateway": l.gateway.String()}}},
			"routes":  []map[string]any{{"dst": "0.0.0.0/0", "gw": l.gateway.String()}},
		},
	}}
	if bindery {
		managed := make([]string, len(l.managed))
		for i, p := range l.managed {
			managed[i] = p.String()
		}
		plugins = append(plugins, map[string]any{
			"type":         cni.PluginType,
			"managedCIDRs": managed,
			"stateDir":     l.stateDir,
			"capabilities": map[string]bool{cni.PodAnnotationsCapability: true},
		})
	}
	data, err := json.Marshal(map[string]any{"cniVersion": v, "name": l.netName, "plugins": plugins})
	if err != nil {
		l.t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		l.t.Fatal(err)
	}
	return list
}

// pod is a network namespace standing in for a Pod's sandbox.
type pod struct {
	lab *lab
	ns  ns.NetNS
	rt  *libcni.RuntimeConf
}

// newPod makes a namespace and the runtime configuration a runtime would
// pass for it, with the egress annotation when egress is not nil.
func (l *lab) newPod(egress []cni.Endpoint) *pod {
	l.t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	annotations := map[string]string{"unrelated": "x"}
	if egress != nil {
		data, err := json.Marshal(egress)
		if err != nil {
			l.t.Fatal(err)
		}
		annotations[cni.EgressAnnotation] = string(data)
	}
	return &pod{lab: l, ns: n, rt: &libcni.RuntimeConf{
		ContainerID:    fmt.Sprintf("%016x", rand.Uint64()),
		NetNS:          n.Path(),
		IfName:         "eth0",
		Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "p"}},
		CapabilityArgs: map[string]any{cni.PodAnnotationsCapability: annotations},
	}}
}

// reaches reports whether a TCP connection from the Pod to addr opens. A
// busy host can be slow to answer, so a timeout is tried again, twice.
func (p *pod) reaches(t testing.TB, addr netip.Addr, port int) bool {
	t.Helper()
	for range 3 {
		if !p.dropped(t, addr, port) {
			return true
		}
	}
	return false
}

// dropped reports whether a TCP connection from the Pod to addr times out,
// as when its SYN is dropped; a connection that opens gives false, and any
// other error fails the test.
func (p *pod) dropped(t testing.TB, addr netip.Addr, port int) bool {
	t.Helper()
	// Another process writing net.ipv4.ip_forward resets every
	// interface's forwarding setting: the lab's are set again first.
	p.lab.forwardAll()
	var timedOut bool
	err := p.ns.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(addr, uint16(port)).String(), time.Second)
		if err == nil {
			return c.Close()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			timedOut = true
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("connect to %s:%d: %v", addr, port, err)
	}
	return timedOut
}

// serve accepts and closes connections in n until the test ends, and
// returns the port.
func serve(t testing.TB, n *netnstest.Namespace, network string) int {
	t.Helper()
	ln, err := n.Listen(network, netip.AddrPortFrom(n.IP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeSubnet picks a /28 for the Pods in netnstest's block that no route on
// the host overlaps.
func freeSubnet(t testing.TB) netip.Prefix {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip route: %v", err)
	}
	var routes []netip.Prefix
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i, w := range f {
			if w == "local" || w == "broadcast" || w == "unicast" {
				continue
			}
			if p, err := netip.ParsePrefix(w); err == nil {
				routes = append(routes, p)
			} else if a, err := netip.ParseAddr(w); err == nil && i <= 1 {
				routes = append(routes, netip.PrefixFrom(a, 32))
			}
			break
		}
	}
	for range 50 {
		b := netip.MustParsePrefix("198.18.0.0/15").Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 + rand.Uint32N(1<<13)<<4
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 28)
		free := true
		for _, r := range routes {
			if r.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p
		}
	}
	t.Fatal("no free /28 in 198.18.0.0/15")
	return netip.Prefix{}
}

// hostDev is the host interface that routes to addr.
func hostDev(t testing.TB, addr netip.Addr) string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "route", "get", addr.String()).Output()
	if err != nil {
		t.Fatalf("ip route get %s: %v", addr, err)
	}
	f := strings.Fields(string(out))
	for i := range f[:len(f)-1] {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	t.Fatalf("no device in %q", out)
	return ""
}

func mustRun(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// tables lists the nftables tables in the namespace at path.
func tables(t testing.TB, path string) string {
	t.Helper()
	var out []byte
	err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		var err error
		out, err = exec.Command("nft", "list", "tables").CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	return string(out)
}

// stateFiles lists what the plugin recorded.
func (l *lab) stateFiles(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(l.stateDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

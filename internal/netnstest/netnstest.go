// Package netnstest gives a test a real network namespace joined to the host
// by a veth pair, so that a server the test runs can be reached at an address
// that is not loopback: kube-apiserver refuses Endpoints on loopback, so an
// aggregated API server must listen somewhere else (DESIGN.md, "Aggregation
// in tests"). It needs root and the ip command (iproute2).
//
// Each namespace gets a /30 of 198.18.0.0/15, the block RFC 2544 reserves for
// benchmarking network devices in a lab (RFC 6890 lists it as not globally
// reachable). DHCP, VPNs, Docker and Kubernetes do not hand it out by default,
// unlike the RFC 1918 blocks; 100.64.0.0/10 is taken by carrier-grade NAT and
// Tailscale, and kube-apiserver refuses link-local 169.254.0.0/16 as it does
// loopback. A /30 that any route on the host already overlaps is never used.
//
// A test process that dies without running its cleanups (a timeout panic,
// SIGKILL) leaves its namespaces, veths and routes behind. The first New in
// each process removes those of processes that have ended.
package netnstest

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bindery-dev/bindery/internal/roottest"
	"golang.org/x/sys/unix"
)

// pool holds every subnet New hands out, one /30 per namespace.
var pool = netip.MustParsePrefix("198.18.0.0/15")

const (
	subnetBits = 30
	slots      = 1 << (subnetBits - 15) // /30s in pool, a /15
	attempts   = 20
	nsVeth     = "veth0" // alone in its namespace, so it needs no unique name
)

// Namespace is a network namespace that New created for one test. IP is the
// only address a test should point anything at; HostIP answers for the host.
type Namespace struct {
	Name   string     // as `ip netns` knows it
	HostIP netip.Addr // the host's end of the veth pair
	IP     netip.Addr // the namespace's end of the veth pair

	ip       string // path of the ip command
	hostVeth string
	linked   bool // hostVeth is ours to delete
}

// sweepOnce makes the first New of a process look for leftovers: they only
// pile up when a process dies, and the next test process cleans them up.
var sweepOnce sync.Once

// New creates a network namespace joined to the host by a veth pair, with an
// address on each end, and removes both when t ends. It skips t unless the
// process runs as root. The first New of a process also removes what dead
// test processes left behind, and says so through t.Logf.
func New(t testing.TB) *Namespace {
	t.Helper()
	ip := ipCommand(t)
	sweepOnce.Do(func() { sweep(ip, t.Logf) })
	n, err := create(ip, os.Getpid(), randomSlot)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := n.remove(t.Logf); err != nil {
			t.Errorf("netnstest: %v", err)
		}
	})
	return n
}

// Listen opens a listener whose socket lives in the namespace, as net.Listen
// does (for example "tcp", ns.IP:0). Only the socket moves: the calling
// process stays in the host's namespace, so a server that serves on the
// listener still reaches loopback services on the host, such as PostgreSQL
// and kube-apiserver. Connections it accepts live in the namespace too.
func (n *Namespace) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("listen on %s %s in network namespace %s: %w", network, address, n.Name, err)
	}
	return l, nil
}

// Do runs f on an OS thread switched into the namespace, for anything else
// that must be created inside it: sockets f opens and processes it starts
// (exec.Cmd.Start) belong to the namespace. Goroutines f starts do not, as
// they run on other threads. The caller's own thread never changes namespace.
func (n *Namespace) Do(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- n.do(f) }()
	return <-done
}

// do runs on a goroutine of its own: when it cannot switch its thread back to
// the host's namespace it leaves the thread locked, and the runtime ends the
// thread with the goroutine instead of handing it to other goroutines.
func (n *Namespace) do(f func() error) error {
	runtime.LockOSThread()
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer unix.Close(host)
	target, err := unix.Open(n.path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open network namespace %s: %w", n.Name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", n.Name, err)
	}
	ferr := f()
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("return from network namespace %s: %w", n.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

func (n *Namespace) path() string { return "/run/netns/" + n.Name }

// create makes a namespace for process pid, normally this one, in the first
// free slot that next picks. Two processes that pick the same slot at once
// cannot both have it: the kernel refuses the second veth of the same name,
// and that one tries another slot.
func create(ip string, pid int, next func() int) (*Namespace, error) {
	var err error
	for range attempts {
		slot := next()
		subnet := slotPrefix(slot)
		var taken bool
		taken, err = routed(subnet)
		if err != nil {
			return nil, err
		}
		if taken {
			err = fmt.Errorf("%s is routed on this host", subnet)
			continue
		}
		n := &Namespace{
			Name:     nsName(pid, slot),
			HostIP:   subnet.Addr().Next(),
			IP:       subnet.Addr().Next().Next(),
			ip:       ip,
			hostVeth: vethName(slot),
		}
		err = n.setUp()
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, errExists) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("find a free /%d in %s after %d attempts: last: %w", subnetBits, pool, attempts, err)
}

// errExists means a name that setUp chose is already taken.
var errExists = errors.New("already exists")

// setUp creates the namespace and the veth pair, and removes whatever it
// made if a step fails.
func (n *Namespace) setUp() (err error) {
	if err := n.run("netns", "add", n.Name); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.remove(discard))
		}
	}()
	hostPrefix := netip.PrefixFrom(n.HostIP, subnetBits).String()
	nsPrefix := netip.PrefixFrom(n.IP, subnetBits).String()
	steps := [][]string{
		{"link", "add", n.hostVeth, "type", "veth", "peer", "name", nsVeth, "netns", n.Name},
		{"addr", "add", hostPrefix, "dev", n.hostVeth},
		{"link", "set", n.hostVeth, "up"},
		{"-n", n.Name, "addr", "add", nsPrefix, "dev", nsVeth},
		{"-n", n.Name, "link", "set", nsVeth, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	}
	for i, args := range steps {
		if err := n.run(args...); err != nil {
			return err
		}
		n.linked = n.linked || i == 0
	}
	// Policy routing (a VPN's rules, say) could still send the address
	// elsewhere; then tests would target something they did not create.
	out, err := exec.Command(n.ip, "-o", "route", "get", n.IP.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route get %s: %w: %s", n.IP, err, strings.TrimSpace(string(out)))
	}
	if !strings.Contains(string(out), " dev "+n.hostVeth+" ") {
		return fmt.Errorf("%s is not routed through %s on this host: %s", n.IP, n.hostVeth, strings.TrimSpace(string(out)))
	}
	return nil
}

// remove deletes the veth pair, then the namespace. Deleting the veth first
// takes the host's address and route away at once, even when a socket that
// outlives the test keeps the namespace itself alive. A veth of the same name
// that another process made is left alone. What is already gone is reported
// to logf, not as an error.
func (n *Namespace) remove(logf func(format string, args ...any)) error {
	var errs []error
	if n.linked {
		if err := n.run("link", "delete", n.hostVeth); err != nil {
			if !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			} else {
				logf("netnstest: veth %s was already gone", n.hostVeth)
			}
		}
	}
	if err := n.run("netns", "delete", n.Name); err != nil {
		if !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		} else {
			logf("netnstest: network namespace %s was already gone", n.Name)
		}
	}
	return errors.Join(errs...)
}

// sweep removes the namespaces that processes which have ended left in
// /run/netns, with their veth pairs, and reports each removal to logf. It
// touches only names that nsName makes, and only those of a pid that /proc
// does not show: a live process's namespaces are never removed. When the
// kernel has given a dead test's pid to another process, which is unlikely
// and harmless, its leftovers stay until that process ends too: telling a
// test binary apart from any other process would be guesswork, and leaving
// something behind is better than removing what a live test uses. It assumes
// every process that names namespaces in /run/netns shares this process's
// PID namespace, as on a host or in one container. Sweeping is best effort:
// a failure is logged, not a reason to fail the test.
func sweep(ip string, logf func(format string, args ...any)) {
	// A /proc from another PID namespace would make every pid look dead.
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		logf("netnstest: /proc does not show this process's pid, so namespaces of dead processes are left alone")
		return
	}
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logf("netnstest: look for namespaces of dead processes: %v", err)
		}
		return
	}
	for _, e := range entries {
		pid, slot, ok := parseName(e.Name())
		if !ok {
			continue
		}
		// Any error but "not there" could hide a live process.
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		n := &Namespace{Name: e.Name(), ip: ip, hostVeth: vethName(slot)}
		if err := n.removeLeftover(logf, pid); err != nil {
			logf("netnstest: remove what process %d left: %v", pid, err)
		}
	}
}

// removeLeftover removes namespace n, which process pid left, and its veth
// pair. The pair is deleted from its end in the namespace, which takes the
// host's end with it; deleting the host's end by name could hit another
// process's veth, as the name is only the slot's lock: pid may have died
// after adding the namespace but before winning the veth. What another
// sweep removed first is passed over in silence.
func (n *Namespace) removeLeftover(logf func(format string, args ...any), pid int) error {
	var errs []error
	switch err := n.run("-n", n.Name, "link", "delete", nsVeth); {
	case err == nil:
		logf("netnstest: removed veth %s of network namespace %s, left by process %d, which has ended", n.hostVeth, n.Name, pid)
	case !strings.Contains(err.Error(), "Cannot find device") && !strings.Contains(err.Error(), "No such file"):
		errs = append(errs, err) // the namespace goes all the same: it may be no namespace at all
	}
	switch err := n.run("netns", "delete", n.Name); {
	case err == nil:
		logf("netnstest: removed network namespace %s, left by process %d, which has ended", n.Name, pid)
	case !strings.Contains(err.Error(), "No such file"):
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// nsName names the namespace that process pid creates in slot.
func nsName(pid, slot int) string { return fmt.Sprintf("bindery-%d-%04x", pid, slot) }

// parseName returns the pid and slot that nsName made name from, and false
// for a name that nsName does not make.
func parseName(name string) (pid, slot int, ok bool) {
	rest, ok := strings.CutPrefix(name, "bindery-")
	if !ok {
		return 0, 0, false
	}
	p, s, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	sl, err := strconv.ParseUint(s, 16, 16)
	if err != nil || sl >= slots {
		return 0, 0, false
	}
	slot = int(sl)
	// Only the exact spelling: no sign, leading zero or upper case hex.
	return pid, slot, nsName(pid, slot) == name
}

// run runs the ip command with args, reporting its output on failure.
func (n *Namespace) run(args ...string) error {
	out, err := exec.Command(n.ip, args...).CombinedOutput()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	if strings.Contains(msg, "File exists") {
		err = errExists
	}
	return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, msg)
}

// ipCommand skips t unless the process runs as root (fails it in CI), and
// returns the path of the ip command, which lives in /usr/sbin, often
// missing from PATH.
func ipCommand(t testing.TB) string {
	t.Helper()
	roottest.Require(t, "netnstest: creating a network namespace")
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("netnstest: the ip command (iproute2) is missing: run `apt-get install iproute2`")
	return ""
}

// vethName names the host's end of the veth pair in slot. The name is the
// slot's lock: the kernel keeps interface names unique.
func vethName(slot int) string { return fmt.Sprintf("bindery-%04x", slot) }

func discard(string, ...any) {}

func randomSlot() int { return rand.IntN(slots) }

// slotPrefix is the /30 numbered slot in pool.
func slotPrefix(slot int) netip.Prefix {
	base := pool.Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(slot) << (32 - subnetBits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), subnetBits)
}

// routed reports whether any IPv4 route of the host's, in any routing table,
// other than a default route, overlaps p. The local table holds a route for
// every address, so this covers the host's addresses as well.
func routed(p netip.Prefix) (bool, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_INET)
	if err != nil {
		return false, fmt.Errorf("list routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return false, fmt.Errorf("list routes: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		dstLen := int(m.Data[1]) // rtmsg.rtm_dst_len
		if dstLen == 0 {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return false, fmt.Errorf("list routes: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type != syscall.RTA_DST {
				continue
			}
			if addr, ok := netip.AddrFromSlice(a.Value); ok && netip.PrefixFrom(addr, dstLen).Overlaps(p) {
				return true, nil
			}
		}
	}
	return false, nil
}

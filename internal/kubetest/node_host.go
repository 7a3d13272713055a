package kubetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// errLocked means another process holds the node lock.
var errLocked = errors.New("locked")

// flock takes an exclusive lock on f without waiting.
func flock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// nodeSysctls are what the kubelet (vm.overcommit_memory, kernel.panic,
// kernel.panic_on_oops) and the CNI bridge with isGateway
// (net.ipv4.ip_forward) set on the host.
var nodeSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"}

// hostPaths are directories the kubelet, containerd and CNI use whatever
// their configuration says; those the node creates are removed with it.
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd", "/etc/cni"}

// sharedHostPaths are directories the node may create that other programs
// use too (containerd puts Pod network namespaces in /run/netns, as
// `ip netns` does): removed only when they did not exist and are empty.
var sharedHostPaths = []string{"/run/netns"}

// hostState is what the node changes on the host, as it was before.
type hostState struct {
	// Dir is the node's directory, whose containerd socket names the
	// shims it started.
	Dir          string            `json:"dir"`
	Sysctls      map[string]string `json:"sysctls"`
	Absent       []string          `json:"absent"`       // hostPaths that did not exist
	AbsentShared []string          `json:"absentShared"` // sharedHostPaths that did not exist
}

// recoverHost returns the host's state from before the node. When a
// previous node's teardown never ran (its test binary was killed), that
// node's saved state is the true one: what it left (links, cgroups,
// directories, sysctls) is undone first. Otherwise the state is read now
// and saved until teardown.
func recoverHost(ctx context.Context, dir string) (*hostState, error) {
	b, err := os.ReadFile(statePath)
	switch {
	case err == nil:
		var h hostState
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("read %s: %w", statePath, err)
		}
		// Only what this package owns; the lock says no node runs.
		if err := h.undoKilledNode(ctx); err != nil {
			return nil, fmt.Errorf("undo what a killed test's node left: %w", err)
		}
		if err := os.Remove(statePath); err != nil {
			return nil, err
		}
		// Saved again below, with this node's directory.
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read %s: %w", statePath, err)
	}
	h, err := saveHost()
	if err != nil {
		return nil, err
	}
	h.Dir = dir
	b, err = json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(statePath, b, 0o600); err != nil {
		return nil, fmt.Errorf("save host state: %w", err)
	}
	return h, nil
}

func saveHost() (*hostState, error) {
	h := &hostState{Sysctls: map[string]string{}}
	for _, name := range nodeSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", name, err)
		}
		h.Sysctls[name] = strings.TrimSpace(string(b))
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			h.Absent = append(h.Absent, p)
		}
	}
	for _, p := range sharedHostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			h.AbsentShared = append(h.AbsentShared, p)
		}
	}
	return h, nil
}

// undoKilledNode ends and removes what a node whose test binary was killed
// left: its containers (their shims name its containerd's socket; their
// processes are in cgroupRoot), their mounts and its directory, the links,
// the cgroups; then restores the host as h says it was.
func (h *hostState) undoKilledNode(ctx context.Context) error {
	var errs []error
	// Any node's shims: a node's directory is named ktnode* (prepareNode),
	// and under the lock no other node runs.
	pids, err := shimsWhere(func(socket string) bool {
		ok, _ := filepath.Match(filepath.Join(os.TempDir(), "ktnode*", "containerd", "containerd.sock"), socket)
		return ok || (h.Dir != "" && socket == filepath.Join(h.Dir, "containerd", "containerd.sock"))
	})
	errs = append(errs, err)
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	netns, err := killCgroupProcs()
	errs = append(errs, err, removeNetns(netns))
	if h.Dir != "" {
		errs = append(errs, unmountUnder(append([]string{h.Dir}, h.Absent...)...))
		if left, err := mountsUnder(h.Dir); err == nil && len(left) == 0 {
			errs = append(errs, os.RemoveAll(h.Dir))
		}
	}
	errs = append(errs, forwardBridge(ctx, false), deleteLink(ctx, bridgeName), deleteLink(ctx, nodeLink), removeCgroupRoot(), h.restore())
	return errors.Join(errs...)
}

// killCgroupProcs kills every process in cgroupRoot, the containers of a
// node whose kubelet is gone, and returns the inodes of their network
// namespaces.
func killCgroupProcs() (map[uint64]bool, error) {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	netns := map[uint64]bool{}
	for _, h := range dirs {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for f := range strings.FieldsSeq(string(b)) {
				var pid int
				if _, err := fmt.Sscanf(f, "%d", &pid); err == nil && pid > 1 {
					var st unix.Stat_t
					if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil {
						netns[st.Ino] = true
					}
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
			return nil
		})
	}
	return netns, nil
}

// removeNetns unmounts and removes the network namespaces in /run/netns
// (where containerd pins a sandbox's) whose inode is in inodes: only those
// of the killed node's containers.
func removeNetns(inodes map[uint64]bool) error {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil // none
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join("/run/netns", e.Name())
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || !inodes[st.Ino] {
			continue
		}
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			continue
		}
		errs = append(errs, os.Remove(p))
	}
	return errors.Join(errs...)
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and the v2
// one, if any) under /sys/fs/cgroup.
func cgroupHierarchies() ([]string, error) {
	mounts, err := mountPoints()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range mounts {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && strings.HasPrefix(m.point, "/sys/fs/cgroup") {
			dirs = append(dirs, m.point)
		}
	}
	return dirs, nil
}

// makeCgroupRoot creates cgroupRoot in every hierarchy: the kubelet checks
// that its --cgroup-root exists, and creates its kubepods tree in it.
func makeCgroupRoot() error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		dir := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) == "cpuset" {
			// A new v1 cpuset starts with no CPUs and no memory nodes, and
			// then admits no process.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return fmt.Errorf("read %s: %w", f, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("set %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes cgroupRoot and everything below it, deepest
// first (a cgroup is removed with rmdir once it holds no process).
func removeCgroupRoot() error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range dirs {
		root := filepath.Join(h, cgroupRoot)
		var tree []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		for _, p := range slices.Backward(tree) {
			if err := rmdirRetry(p); err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirRetry removes a cgroup, waiting a little while its last processes
// exit (EBUSY).
func rmdirRetry(p string) error {
	var err error
	for range 50 {
		err = unix.Rmdir(p)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

type mount struct{ point, fstype string }

// mountPoints reads this process's mount table.
func mountPoints() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var ms []mount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return ms, s.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists the mount points at or below any of dirs, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	ms, err := mountPoints()
	if err != nil {
		return nil, err
	}
	var under []string
	for _, m := range ms {
		for _, d := range dirs {
			if m.point == d || strings.HasPrefix(m.point, d+"/") {
				under = append(under, m.point)
				break
			}
		}
	}
	slices.SortFunc(under, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(under), nil
}

// unmountUnder detaches every mount at or below dirs.
func unmountUnder(dirs ...string) error {
	points, err := mountsUnder(dirs...)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// stop deletes the node's Pods while the kubelet still runs (so it
// unmounts their volumes and CNI releases their addresses), stops the
// kubelet and containerd, and restores the host. It returns every problem.
func (n *Node) stop(ctx context.Context) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n.kubelet != nil && n.containerd != nil {
		add(n.drain(ctx))
	}
	if n.kubelet != nil {
		add(n.kubelet.stop(stopGrace))
	}
	if n.containerd != nil {
		add(n.removeContainers(ctx))
		add(n.containerd.stop(stopGrace))
		add(n.killShims())
	}
	if n.host != nil {
		add(unmountUnder(append([]string{n.Dir}, n.host.Absent...)...))
		add(removeCgroupRoot())
		add(forwardBridge(ctx, false))
		add(deleteLink(ctx, bridgeName))
		add(deleteLink(ctx, nodeLink))
		if err := n.host.restore(); err != nil {
			add(err)
		} else {
			add(os.Remove(statePath))
		}
	}
	if left, err := mountsUnder(n.Dir); err != nil || len(left) > 0 {
		// Never remove a tree that still has something mounted in it: a
		// bind mount would take the host's files along.
		add(fmt.Errorf("mounts left under %s, not removed: %v %w", n.Dir, left, err))
	} else {
		add(os.RemoveAll(n.Dir))
	}
	if n.lock != nil {
		add(n.lock.Close()) // releases the flock
	}
	return errors.Join(errs...)
}

// drain deletes every Pod and waits until the kubelet has stopped them
// and the API server has them no more. kube-scheduler and
// kube-controller-manager are stopped first, so nothing makes new ones.
func (n *Node) drain(ctx context.Context) error {
	for _, p := range n.c.procs {
		if p.name == "kube-scheduler" || p.name == "kube-controller-manager" {
			if err := p.stop(stopGrace); err != nil {
				return err
			}
		}
	}
	cs, err := kubernetes.NewForConfig(n.c.Config())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	grace := int64(1)
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		if err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("delete pods in %s: %w", ns.Name, err)
		}
	}
	for {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			left := -1
			if pods != nil {
				left = len(pods.Items)
			}
			return fmt.Errorf("wait for the kubelet to stop %d pods: %w", left, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// A deleted Pod's sandbox is stopped (CNI DEL, network namespace
	// removed) before the kubelet lets the API server forget it, but its
	// containers are removed only by the kubelet's garbage collection;
	// removeContainers does that once the kubelet is gone.
	return nil
}

// removeContainers kills and deletes what is left in containerd: the
// stopped containers and sandboxes of deleted Pods.
func (n *Node) removeContainers(ctx context.Context) error {
	out, err := n.ctr(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for id := range strings.FieldsSeq(out) {
		if _, err := n.ctr(ctx, "tasks", "delete", "--force", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
		if _, err := n.ctr(ctx, "containers", "delete", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims ends the runc shims the node's containerd started that
// outlived it; they are known by its socket on their command line.
func (n *Node) killShims() error {
	pids, err := shimsOf(n.containerdSock)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	return nil
}

// shimsOf lists the containerd shims whose command line names socket.
func shimsOf(socket string) ([]int, error) {
	return shimsWhere(func(s string) bool { return s == socket })
}

// shimsWhere lists the containerd shims whose -address argument (their
// containerd's socket) satisfies match.
func shimsWhere(match func(socket string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		if i := slices.Index(args, "-address"); i >= 0 && i+1 < len(args) && match(args[i+1]) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// deleteLink removes the network interface name if it exists.
func deleteLink(ctx context.Context, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ip", "link", "delete", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("delete link %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forwardRules accept, in the host's iptables FORWARD chain, what crosses
// the node's bridge: on a host whose FORWARD policy is DROP with
// br_netfilter passing bridged frames through iptables (as Docker leaves
// a machine), Pods could otherwise not talk to each other, as a cluster's
// network plugin (or the reference firewall plugin) lets them.
var forwardRules = [][]string{
	{"FORWARD", "-i", bridgeName, "-m", "comment", "--comment", "kubetest node", "-j", "ACCEPT"},
	{"FORWARD", "-o", bridgeName, "-m", "comment", "--comment", "kubetest node", "-j", "ACCEPT"},
}

// forwardBridge inserts forwardRules, or deletes every copy of them (also
// those a killed node left).
func forwardBridge(ctx context.Context, on bool) error {
	for _, rule := range forwardRules {
		if on {
			if out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput(); err != nil {
				return fmt.Errorf("iptables -I %s: %w: %s", strings.Join(rule, " "), err, strings.TrimSpace(string(out)))
			}
			continue
		}
		for range 10 {
			// -C fails once no copy is left.
			if exec.CommandContext(ctx, "iptables", append([]string{"-w", "-C"}, rule...)...).Run() != nil {
				break
			}
			if out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
				return fmt.Errorf("iptables -D %s: %w: %s", strings.Join(rule, " "), err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// restore sets the sysctls back and removes the host directories the
// node created.
func (h *hostState) restore() error {
	var errs []error
	for name, v := range h.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s: %w", name, err))
		}
	}
	for _, p := range h.Absent {
		if left, _ := mountsUnder(p); len(left) > 0 {
			errs = append(errs, fmt.Errorf("mounts left under %s, not removed: %v", p, left))
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range h.AbsentShared {
		// Fails, as it should, while another program has something there.
		_ = unix.Rmdir(p)
	}
	return errors.Join(errs...)
}

package deviceplugin

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// node is one device node found by a glob.
type node struct {
	id            string
	hostPath      string
	containerPath string
	permissions   string
	mount         bool // a plain file, handed out as a bind mount
	healthy       bool
	numa          []int64
	numaRead      bool // numa was looked up for hostPath
	// lostAt is when a scan first missed the node; zero while found.
	lostAt time.Time
}

// spec is what the container runtime needs to expose the node.
func (n *node) spec() *pluginapi.DeviceSpec {
	return &pluginapi.DeviceSpec{HostPath: n.hostPath, ContainerPath: n.containerPath, Permissions: n.permissions}
}

// mountSpec is what the container runtime needs to expose a plain file:
// read-only unless the permissions allow writing.
func (n *node) mountSpec() *pluginapi.Mount {
	return &pluginapi.Mount{HostPath: n.hostPath, ContainerPath: n.containerPath, ReadOnly: !strings.Contains(n.permissions, "w")}
}

// add appends what exposes the node to specs or mounts.
func (n *node) add(specs []*pluginapi.DeviceSpec, mounts []*pluginapi.Mount) ([]*pluginapi.DeviceSpec, []*pluginapi.Mount) {
	if n.mount {
		return specs, append(mounts, n.mountSpec())
	}
	return append(specs, n.spec()), mounts
}

// kindProblem says why a match of g cannot be handed to a container as
// configured, or "" when it can: a glob without mount gives device
// nodes (character or block), one with mount gives plain files.
func kindProblem(g DeviceGlob, fi os.FileInfo) string {
	device := fi.Mode()&os.ModeDevice != 0
	switch {
	case g.Mount && !fi.Mode().IsRegular():
		return "not a plain file, and the glob asks for mounts"
	case !g.Mount && !device:
		return "not a device node (set mount: true to hand plain files to containers as mounts)"
	}
	return ""
}

// forgetLostAfter is how long a device that disappeared is still
// advertised, Unhealthy, before the inventory forgets it.
const forgetLostAfter = 10 * time.Minute

// inventory finds a plugin's device nodes and remembers the nodes it has
// seen, so that one that disappears is reported Unhealthy rather than
// silently dropped, until it has been gone for forgetLostAfter. Only the
// plugin's scanning goroutine calls scan.
//
// Paths in the configuration and in what the kubelet is told are the
// node's; the agent looks them up under root, where a container running
// the agent mounts the node's file system ("" when it runs on the node).
type inventory struct {
	cfg      *Config
	root     string
	sysfs    string
	relative bool // one glob: IDs are relative to its literal directory
	known    map[string]*node
	order    []string // IDs in the order first seen
	log      *slog.Logger
	// skipped holds the node paths matched but not advertised, with the
	// reason, so that each is logged once rather than on every scan.
	skipped map[string]string
	now     func() time.Time
}

func newInventory(cfg *Config, root, sysfs string, log *slog.Logger) *inventory {
	return &inventory{cfg: cfg, root: root, sysfs: sysfs, relative: len(cfg.Devices) == 1, known: map[string]*node{}, log: log,
		skipped: map[string]string{}, now: time.Now}
}

// local is where the agent finds the node's path p.
func (inv *inventory) local(p string) string { return filepath.Join(inv.root, p) }

// onNode is the node's path for the agent's path p.
func (inv *inventory) onNode(p string) string {
	if inv.root == "" {
		return p
	}
	return filepath.Join("/", strings.TrimPrefix(p, inv.root))
}

// scan looks at the device paths again and returns the snapshot to
// advertise and the directories to watch for changes.
func (inv *inventory) scan() (*snapshot, []string) {
	seen := map[string]bool{}
	skipped := map[string]string{}
	matched := make([]bool, len(inv.cfg.Devices))
	var watch []string
	for i, g := range inv.cfg.Devices {
		watch = append(watch, watchDirs(inv.local(g.Path))...)
		matches, _ := filepath.Glob(inv.local(g.Path)) // the pattern was validated
		for _, local := range matches {
			m := inv.onNode(local)
			host := resolve(inv.root, m)
			if host != m {
				// A link's target may go while the link stays.
				watch = append(watch, filepath.Dir(inv.local(host)))
			}
			fi, err := os.Stat(inv.local(host))
			if err == nil && fi.IsDir() {
				continue // a directory is never a device
			}
			if err == nil {
				if why := kindProblem(g, fi); why != "" {
					skipped[m] = why
					if inv.skipped[m] != why {
						inv.log.Warn("matched path not advertised", "path", m, "reason", why)
					}
					continue
				}
			}
			id := deviceID(g.Path, m, inv.relative)
			if seen[id] {
				continue // matched by an earlier glob, or the same ID after sanitising
			}
			seen[id] = true
			matched[i] = true
			n := inv.known[id]
			if n == nil {
				n = &node{id: id}
				inv.known[id] = n
				inv.order = append(inv.order, id)
			}
			n.lostAt = time.Time{}
			n.refresh(inv, g, m, host, fi, err)
		}
	}
	inv.forgetLost(seen)
	inv.skipped = skipped
	return inv.snapshot(matched), dedupe(watch)
}

// forgetLost marks the known nodes this scan did not see Unhealthy, and
// forgets those gone for forgetLostAfter (the resync's scans come every
// resyncInterval, so it happens within that of the limit).
func (inv *inventory) forgetLost(seen map[string]bool) {
	now := inv.now()
	inv.order = slices.DeleteFunc(inv.order, func(id string) bool {
		n := inv.known[id]
		if seen[id] {
			return false
		}
		n.healthy = false
		if n.lostAt.IsZero() {
			n.lostAt = now
		}
		if now.Sub(n.lostAt) < forgetLostAfter {
			return false
		}
		delete(inv.known, id)
		return true
	})
}

// refresh records what a stat of the node behind match (host, its
// symlinks resolved) found; NUMA locality is read once per host path.
func (n *node) refresh(inv *inventory, g DeviceGlob, match, host string, fi os.FileInfo, statErr error) {
	n.containerPath = cmp.Or(g.ContainerPath, match)
	n.permissions = cmp.Or(g.Permissions, defaultPermissions)
	n.mount = g.Mount
	n.healthy = statErr == nil && readable(inv.local(host), fi)
	if !n.healthy {
		n.hostPath = cmp.Or(n.hostPath, host)
		return
	}
	if host != n.hostPath || !n.numaRead {
		n.hostPath = host
		n.numa = numaNodes(inv.sysfs, fi)
		n.numaRead = true
	}
}

// resolve follows the symlinks that p ends in (as /dev/serial/by-id/...
// and /dev/dri/by-path/... are) to the node the runtime must create,
// reading them under root, where an absolute target is the node's too.
func resolve(root, p string) string {
	for range 40 { // the kernel's limit on nested links
		target, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return p // not a link (any more)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	return p
}

// readable reports whether the node has a read permission bit and, for a
// plain file, this process may read it. The bit is checked as well as
// access(2) because a root process passes access(2) for any mode, and a
// node whose read bits an operator removed is meant to be taken out of
// service. A device node is not checked with access(2): the kernel asks
// the caller's device cgroup there too, and an agent in a Pod (the
// DaemonSet of deploy/nodeagent) is allowed only the runtime's default
// devices, so /dev/kvm or /dev/fuse would look unusable while the Pods
// they are given to may use them. The agent never opens a device node.
func readable(path string, fi os.FileInfo) bool {
	if fi.Mode().Perm()&0o444 == 0 {
		return false
	}
	if fi.Mode()&(os.ModeDevice|os.ModeCharDevice) != 0 {
		return true
	}
	return syscall.Access(path, 4 /* R_OK */) == nil
}

// snapshot builds what the plugin advertises from the known nodes.
func (inv *inventory) snapshot(matched []bool) *snapshot {
	nodes := make([]*node, 0, len(inv.order))
	for _, id := range inv.order {
		c := *inv.known[id]
		nodes = append(nodes, &c)
	}
	if inv.cfg.Slots > 0 {
		return slotSnapshot(inv.cfg, nodes, matched)
	}
	s := &snapshot{byID: make(map[string]*entry, len(nodes))}
	for i, n := range nodes {
		e := &entry{order: i, healthy: n.healthy, numa: n.numa, hostPaths: []string{n.hostPath}}
		e.specs, e.mounts = n.add(nil, nil)
		s.add(n.id, e)
	}
	return s
}

// slotSnapshot advertises cfg.Slots interchangeable slots. They are
// healthy when every glob matched and every node is healthy, and each
// hands out all the nodes.
func slotSnapshot(cfg *Config, nodes []*node, matched []bool) *snapshot {
	healthy := !slices.Contains(matched, false)
	var specs []*pluginapi.DeviceSpec
	var mounts []*pluginapi.Mount
	var hostPaths []string
	var numa []int64
	for _, n := range nodes {
		healthy = healthy && n.healthy
		specs, mounts = n.add(specs, mounts)
		hostPaths = append(hostPaths, n.hostPath)
		for _, id := range n.numa {
			if !slices.Contains(numa, id) {
				numa = append(numa, id)
			}
		}
	}
	slices.Sort(numa)
	_, typ, _ := strings.Cut(cfg.ResourceName, "/")
	s := &snapshot{byID: make(map[string]*entry, cfg.Slots)}
	for i := range cfg.Slots {
		s.add(fmt.Sprintf("%s-%d", sanitizeID(typ), i), &entry{order: i, healthy: healthy, numa: numa, specs: specs, mounts: mounts, hostPaths: hostPaths})
	}
	return s
}

// deviceID derives a stable device ID from the matched path: relative to
// the glob's literal directory when the plugin has one glob (foo-1 for
// /some/dir/foo-1 matched by /some/dir/foo-*), else the whole path.
func deviceID(glob, match string, relative bool) string {
	id := strings.TrimPrefix(match, "/")
	if relative {
		if r, err := filepath.Rel(literalDir(glob), match); err == nil {
			id = r
		}
	}
	return sanitizeID(id)
}

// sanitizeID keeps letters, digits, '.', '_' and '-', replacing the rest
// (such as '/') by '_', so IDs are safe in environment variables and CDI
// names.
func sanitizeID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// literalDir is the longest directory prefix of glob without pattern
// characters.
func literalDir(glob string) string {
	parts := strings.Split(glob, "/")
	k := len(parts) - 1
	for i, p := range parts[:k] {
		if hasMeta(p) {
			k = i
			break
		}
	}
	return "/" + filepath.Join(parts[:k]...)
}

// watchDirs lists the directories whose entries decide what glob matches:
// its literal directory (or, while that is missing, the nearest existing
// ancestor, to see it appear) and every directory matched by its
// intermediate components.
func watchDirs(glob string) []string {
	lit := literalDir(glob)
	dirs := []string{existingAncestor(lit)}
	rest := strings.Split(strings.TrimPrefix(strings.TrimPrefix(glob, lit), "/"), "/")
	prefix := lit
	for _, part := range rest[:len(rest)-1] {
		prefix = filepath.Join(prefix, part)
		matches, _ := filepath.Glob(prefix)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				dirs = append(dirs, m)
			}
		}
	}
	return dirs
}

func existingAncestor(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// snapshot is an immutable view of the advertised devices, swapped whole
// after every scan so Allocate reads it without locks.
type snapshot struct {
	list []*pluginapi.Device
	byID map[string]*entry
}

// entry is one advertised device (a node, or a slot).
type entry struct {
	order     int
	healthy   bool
	numa      []int64
	specs     []*pluginapi.DeviceSpec
	mounts    []*pluginapi.Mount // plain files, from globs with mount set
	hostPaths []string
}

func (s *snapshot) add(id string, e *entry) {
	d := &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy}
	if e.healthy {
		d.Health = pluginapi.Healthy
	}
	if len(e.numa) > 0 {
		d.Topology = &pluginapi.TopologyInfo{}
		for _, n := range e.numa {
			d.Topology.Nodes = append(d.Topology.Nodes, &pluginapi.NUMANode{ID: n})
		}
	}
	s.list = append(s.list, d)
	s.byID[id] = e
}

// sameAdvertisement reports whether two snapshots would send the kubelet
// the same list.
func sameAdvertisement(a, b *snapshot) bool {
	if a == nil || b == nil || len(a.list) != len(b.list) {
		return false
	}
	for i, d := range a.list {
		e := b.list[i]
		if d.ID != e.ID || d.Health != e.Health || !slices.Equal(a.byID[d.ID].numa, b.byID[e.ID].numa) {
			return false
		}
	}
	return true
}

// counts returns the number of healthy and unhealthy devices.
func (s *snapshot) counts() (healthy, unhealthy int) {
	for _, d := range s.list {
		if d.Health == pluginapi.Healthy {
			healthy++
		} else {
			unhealthy++
		}
	}
	return healthy, unhealthy
}

package cni_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// TestChain drives bridge → host-local → bindery-cni through libcni, as a
// runtime does, under every supported spec version.
func TestChain(t *testing.T) {
	l := setup(t)
	for _, v := range specVersions {
		t.Run(v, func(t *testing.T) {
			list := l.conflist(v, true)
			svcA, svcB := l.svcPorts[0], l.svcPorts[1]

			t.Run("granted port only", func(t *testing.T) {
				p := l.newPod([]cni.Endpoint{{Host: l.svc.IP.String(), Ports: []string{strconv.Itoa(svcA)}, Protocol: "tcp"}})
				res, err := l.cni.AddNetworkList(ctx(t), list, p.rt)
				if err != nil {
					t.Fatalf("ADD: %v", err)
				}
				if res.Version() != v {
					t.Errorf("result version %s, want %s", res.Version(), v)
				}
				r, err := current.NewResultFromResult(res)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.IPs) != 1 || !l.podSubnet.Contains(mustAddr(t, r.IPs[0].Address.IP.String())) {
					t.Fatalf("result IPs %v, want one in %s: the bridge's result must pass through", r.IPs, l.podSubnet)
				}
				if err := l.cni.CheckNetworkList(ctx(t), list, p.rt); err != nil {
					t.Fatalf("CHECK: %v", err)
				}
				if !p.reaches(t, l.svc.IP, svcA) {
					t.Errorf("Pod does not reach its granted endpoint %s:%d", l.svc.IP, svcA)
				}
				if !p.dropped(t, l.svc.IP, svcB) {
					t.Errorf("Pod reaches %s:%d, a port it was not granted", l.svc.IP, svcB)
				}
				if !p.dropped(t, l.other.IP, l.otherPort) {
					t.Errorf("Pod reaches %s:%d, an address it was not granted", l.other.IP, l.otherPort)
				}
				if !p.reaches(t, l.outside.IP, l.outsidePort) {
					t.Errorf("Pod does not reach %s:%d, outside the managed ranges", l.outside.IP, l.outsidePort)
				}

				// CHECK is real: a chain someone flushed fails it.
				if err := ns.WithNetNSPath(p.rt.NetNS, func(ns.NetNS) error {
					return exec.Command("nft", "flush", "chain", "inet", "bindery", "egress").Run()
				}); err != nil {
					t.Fatal(err)
				}
				if err := l.cni.CheckNetworkList(ctx(t), list, p.rt); err == nil || !strings.Contains(err.Error(), "differ") {
					t.Errorf("CHECK after the rules were flushed: %v, want an error saying they differ", err)
				}

				for i := range 2 {
					if err := l.cni.DelNetworkList(ctx(t), list, p.rt); err != nil {
						t.Fatalf("DEL #%d: %v", i+1, err)
					}
				}
				if got := tables(t, p.rt.NetNS); strings.Contains(got, "bindery") {
					t.Errorf("tables after DEL: %s", got)
				}
				if got := l.stateFiles(t); len(got) != 0 {
					t.Errorf("state after DEL: %v", got)
				}
			})

			t.Run("no grants", func(t *testing.T) {
				p := l.newPod(nil)
				if _, err := l.cni.AddNetworkList(ctx(t), list, p.rt); err != nil {
					t.Fatalf("ADD: %v", err)
				}
				t.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(t), list, p.rt) })
				for _, port := range l.svcPorts {
					if !p.dropped(t, l.svc.IP, port) {
						t.Errorf("Pod without grants reaches %s:%d", l.svc.IP, port)
					}
				}
				if !p.dropped(t, l.other.IP, l.otherPort) {
					t.Errorf("Pod without grants reaches %s:%d", l.other.IP, l.otherPort)
				}
				if !p.reaches(t, l.outside.IP, l.outsidePort) {
					t.Errorf("Pod without grants does not reach %s:%d, outside the managed ranges", l.outside.IP, l.outsidePort)
				}
			})

			t.Run("whole address", func(t *testing.T) {
				// protocol all without ports grants the address, and
				// shows the path to the second service works.
				p := l.newPod([]cni.Endpoint{{Host: l.other.IP.String(), Ports: []string{}, Protocol: "all"}})
				if _, err := l.cni.AddNetworkList(ctx(t), list, p.rt); err != nil {
					t.Fatalf("ADD: %v", err)
				}
				t.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(t), list, p.rt) })
				if !p.reaches(t, l.other.IP, l.otherPort) {
					t.Errorf("Pod granted all of %s does not reach port %d", l.other.IP, l.otherPort)
				}
				if !p.dropped(t, l.svc.IP, svcA) {
					t.Errorf("Pod granted only %s reaches %s:%d", l.other.IP, l.svc.IP, svcA)
				}
			})

			t.Run("DEL without the namespace", func(t *testing.T) {
				p := l.newPod(nil)
				if _, err := l.cni.AddNetworkList(ctx(t), list, p.rt); err != nil {
					t.Fatalf("ADD: %v", err)
				}
				p.ns.Close()
				// testutils bind-mounts the namespace: unmount, then remove.
				if err := syscall.Unmount(p.rt.NetNS, syscall.MNT_DETACH); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p.rt.NetNS); err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					if err := l.cni.DelNetworkList(ctx(t), list, p.rt); err != nil {
						t.Fatalf("DEL #%d without the namespace: %v", i+1, err)
					}
				}
				if got := l.stateFiles(t); len(got) != 0 {
					t.Errorf("state after DEL: %v", got)
				}
			})

			if v != "1.1.0" {
				return
			}
			t.Run("STATUS", func(t *testing.T) {
				if err := l.cni.GetStatusNetworkList(ctx(t), list); err != nil {
					t.Fatalf("STATUS: %v", err)
				}
			})
			t.Run("GC", func(t *testing.T) {
				kept := l.newPod(nil)
				leaked := l.newPod(nil)
				for _, p := range []*pod{kept, leaked} {
					if _, err := l.cni.AddNetworkList(ctx(t), list, p.rt); err != nil {
						t.Fatalf("ADD: %v", err)
					}
				}
				t.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(t), list, kept.rt) })
				// The runtime forgets the leaked attachment: libcni's
				// cache loses it, so GC can only reach it through the
				// plugin's own record.
				if err := os.RemoveAll(filepath.Join(l.cacheDir, "results")); err != nil {
					t.Fatal(err)
				}
				err := l.cni.GCNetworkList(ctx(t), list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: kept.rt.ContainerID, IfName: kept.rt.IfName}}})
				if err != nil {
					t.Fatalf("GC: %v", err)
				}
				if got := tables(t, leaked.rt.NetNS); strings.Contains(got, "bindery") {
					t.Errorf("leaked attachment's table after GC: %s", got)
				}
				if got := tables(t, kept.rt.NetNS); !strings.Contains(got, "bindery") {
					t.Errorf("valid attachment's table gone after GC: %q", got)
				}
				files := l.stateFiles(t)
				if len(files) != 1 || !strings.Contains(files[0], kept.rt.ContainerID) {
					t.Errorf("state after GC: %v, want only %s's", files, kept.rt.ContainerID)
				}
			})
		})
	}
}

// TestRestrictedCannotFlush shows that a process in the Pod's namespace
// without CAP_NET_ADMIN, as under the restricted Pod Security level, cannot
// remove the rules.
func TestRestrictedCannotFlush(t *testing.T) {
	l := setup(t)
	list := l.conflist("1.1.0", true)
	p := l.newPod(nil)
	if _, err := l.cni.AddNetworkList(ctx(t), list, p.rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	t.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(t), list, p.rt) })
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("nft is not installed")
	}
	var out []byte
	err = ns.WithNetNSPath(p.rt.NetNS, func(ns.NetNS) error {
		cmd := exec.Command(nft, "flush", "table", "inet", "bindery")
		// Leaving uid 0 drops every capability, as runAsNonRoot with
		// capabilities dropped does.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	if err == nil {
		t.Fatalf("an unprivileged process flushed the table: %s", out)
	}
	if !strings.Contains(string(out), "Operation not permitted") {
		t.Errorf("nft flush as nobody: %v: %s, want Operation not permitted", err, out)
	}
	if err := l.cni.CheckNetworkList(ctx(t), list, p.rt); err != nil {
		t.Errorf("CHECK after the attempt: %v", err)
	}
}

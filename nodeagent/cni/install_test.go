package cni_test

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// flannelConf is a cluster network's conflist as one is found on nodes.
const flannelConf = `{
  "name": "cbr0",
  "cniVersion": "1.0.0",
  "plugins": [
    {"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}, "mtu": 1450},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

func installDirs(t *testing.T) (src, bin, conf string) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, "bindery-cni")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, conf = filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return src, bin, conf
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func entry(cidrs ...string) map[string]any { return cni.NewEntry(cidrs, "", "") }

func TestInstallChainsIdempotently(t *testing.T) {
	t.Parallel()
	src, bin, conf := installDirs(t)
	path := filepath.Join(conf, "10-flannel.conflist")
	if err := os.WriteFile(path, []byte(flannelConf), 0o644); err != nil {
		t.Fatal(err)
	}
	// A later file is not the one the runtime uses.
	if err := os.WriteFile(filepath.Join(conf, "99-other.conflist"), []byte(flannelConf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cni.Install(quiet, src, bin, conf, entry("198.18.0.0/15")); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	if err := cni.Install(quiet, src, bin, conf, entry("198.18.0.0/15")); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Errorf("second install changed the conflist:\n%s\n%s", first, second)
	}
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	if got := strings.Join(types, ","); got != "flannel,portmap,bindery-cni" {
		t.Errorf("chain %s, want flannel,portmap,bindery-cni", got)
	}
	if !strings.Contains(string(first), `"mtu": 1450`) || !strings.Contains(string(first), `"hairpinMode": true`) {
		t.Errorf("the cluster plugin's settings changed:\n%s", first)
	}
	if other, _ := os.ReadFile(filepath.Join(conf, "99-other.conflist")); string(other) != flannelConf {
		t.Errorf("a conflist the runtime does not use was changed")
	}
	if st, err := os.Stat(filepath.Join(bin, cni.PluginType)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("installed binary: %v, %v", st, err)
	}

	// New settings replace the entry instead of adding one.
	if err := cni.Install(quiet, src, bin, conf, entry("198.18.0.0/16")); err != nil {
		t.Fatal(err)
	}
	third, _ := os.ReadFile(path)
	if strings.Count(string(third), cni.PluginType) != 1 || !strings.Contains(string(third), "198.18.0.0/16") {
		t.Errorf("reinstall with new settings:\n%s", third)
	}

	if err := cni.Uninstall(quiet, bin, conf); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if strings.Contains(string(after), cni.PluginType) {
		t.Errorf("uninstall left the entry:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(bin, cni.PluginType)); !os.IsNotExist(err) {
		t.Errorf("uninstall left the binary: %v", err)
	}
	if err := cni.Uninstall(quiet, bin, conf); err != nil {
		t.Errorf("second uninstall: %v", err)
	}
}

func TestInstallRefuses(t *testing.T) {
	t.Parallel()
	t.Run("no configuration", func(t *testing.T) {
		src, bin, conf := installDirs(t)
		err := cni.Install(quiet, src, bin, conf, entry("198.18.0.0/15"))
		if err == nil || !strings.Contains(err.Error(), "install the cluster's network plugin first") {
			t.Errorf("install without a conflist: %v", err)
		}
	})
	t.Run("old spec version", func(t *testing.T) {
		src, bin, conf := installDirs(t)
		old := strings.Replace(flannelConf, "1.0.0", "0.3.1", 1)
		if err := os.WriteFile(filepath.Join(conf, "10-flannel.conflist"), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		err := cni.Install(quiet, src, bin, conf, entry("198.18.0.0/15"))
		if err == nil || !strings.Contains(err.Error(), `cniVersion "0.3.1"`) {
			t.Errorf("install into a 0.3.1 conflist: %v", err)
		}
	})
	t.Run("options", func(t *testing.T) {
		o := cni.InstallOptions{Install: true, Uninstall: true, ManagedCIDRs: "198.18.0.0/15, nope"}
		err := o.Validate()
		for _, want := range []string{"give one", "--cni-bin-dir", "--cni-conf-dir", `"nope" is not a CIDR`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Validate: %v, want it to say %q", err, want)
			}
		}
	})
}

// TestInstalledChainWorks installs into a single-plugin bridge .conf, as a
// simple cluster has, and drives the result through libcni: the Pod reaches
// its grant and nothing else in the managed range.
func TestInstalledChainWorks(t *testing.T) {
	l := setup(t)
	bdir, _ := buildPlugins(t)
	_, bin, conf := installDirs(t)
	bridgeOnly := l.conflist("1.0.0", false)
	single := bridgeOnly.Plugins[0].Bytes
	single = bytes.Replace(single, []byte(`{`), []byte(`{"cniVersion":"1.0.0","name":"`+l.netName+`",`), 1)
	if err := os.WriteFile(filepath.Join(conf, "10-bridge.conf"), single, 0o644); err != nil {
		t.Fatal(err)
	}
	e := entry(l.managed[0].String(), l.managed[1].String())
	e["stateDir"] = l.stateDir
	if err := cni.Install(quiet, filepath.Join(bdir, cni.PluginType), bin, conf, e); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(conf, "10-bridge.conf")); !os.IsNotExist(err) {
		t.Errorf("the .conf is still there beside its .conflist: %v", err)
	}
	list, err := libcni.ConfListFromFile(filepath.Join(conf, "10-bridge.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	_, ref := buildPlugins(t)
	c := libcni.NewCNIConfigWithCacheDir([]string{bin, ref}, l.cacheDir, nil)
	p := l.newPod([]cni.Endpoint{{Host: l.svc.IP.String(), Ports: []string{strconv.Itoa(l.svcPorts[1])}}})
	if _, err := c.AddNetworkList(ctx(t), list, p.rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	t.Cleanup(func() { _ = c.DelNetworkList(ctx(t), list, p.rt) })
	if !p.reaches(t, l.svc.IP, l.svcPorts[1]) || !p.dropped(t, l.svc.IP, l.svcPorts[0]) {
		t.Errorf("the installed chain does not enforce the grant")
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeNodeagentInstallCNI runs `bindery serve nodeagent --install-cni`
// as the DaemonSet's init container does, with the managed ranges from the
// environment, then `--uninstall-cni`: each exits once done, without the
// node agent's --config.
func TestServeNodeagentInstallCNI(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bin, conf := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plugin := filepath.Join(root, "bindery-cni")
	if err := os.WriteFile(plugin, []byte("plugin"), 0o644); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(conf, "10-net.conflist")
	if err := os.WriteFile(conflist, []byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := []string{"--cni-bin-dir", bin, "--cni-conf-dir", conf}

	p := start(t, []string{"BINDERY_CNI_MANAGED_CIDRS=198.18.0.0/15,2001:db8::/32"},
		append([]string{"serve", "nodeagent", "--install-cni", "--cni-plugin-binary", plugin}, dirs...)...)
	if err := p.wait(t); err != nil {
		t.Fatalf("--install-cni: %v\n%s", err, p.stderr.String())
	}
	data, _ := os.ReadFile(conflist)
	for _, want := range []string{`"type": "bindery-cni"`, `"198.18.0.0/15"`, `"2001:db8::/32"`, `"io.kubernetes.cri.pod-annotations": true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("conflist after --install-cni lacks %s:\n%s", want, data)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(bin, "bindery-cni")); string(got) != "plugin" {
		t.Errorf("installed binary %q", got)
	}

	p = start(t, nil, append([]string{"serve", "nodeagent", "--uninstall-cni"}, dirs...)...)
	if err := p.wait(t); err != nil {
		t.Fatalf("--uninstall-cni: %v\n%s", err, p.stderr.String())
	}
	data, _ = os.ReadFile(conflist)
	if strings.Contains(string(data), "bindery-cni") {
		t.Errorf("conflist after --uninstall-cni:\n%s", data)
	}

	p = start(t, nil, append([]string{"serve", "nodeagent", "--install-cni"}, dirs...)...)
	if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), "--cni-managed-cidrs is required") {
		t.Errorf("--install-cni without ranges: %v\n%s", err, p.stderr.String())
	}
}

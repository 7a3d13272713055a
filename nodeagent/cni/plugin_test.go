package cni_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// TestAbout runs the binary without a command, as a person trying it
// would: it names itself and its software version, and VERSION still
// reports the spec versions it speaks.
func TestAbout(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	dir, _ := buildPlugins(t)
	cmd := exec.Command(filepath.Join(dir, cni.PluginType))
	cmd.Env = []string{}
	out, _ := cmd.CombinedOutput()
	want := cni.PluginType + " " + testVersion + ": a Pod reaches the managed services it is bound to, and no others\n" +
		"CNI protocol versions supported: 0.4.0, 1.0.0, 1.1.0\n"
	if string(out) != want {
		t.Errorf("bindery-cni without CNI_COMMAND says %q, want %q", out, want)
	}
	cmd = exec.Command(filepath.Join(dir, cni.PluginType))
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), `"supportedVersions":["0.4.0","1.0.0","1.1.0"]`) {
		t.Errorf("VERSION: %s, %v", out, err)
	}
}

// TestPluginDirect calls the binary as a runtime would, without libcni: the
// previous result comes back byte for byte, and bad input gets the spec's
// error codes naming what is wrong.
func TestPluginDirect(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	dir, _ := buildPlugins(t)
	bin := filepath.Join(dir, cni.PluginType)
	n, err := testutils.NewNS()
	if err != nil {
		t.Skipf("network namespace (needs root): %v", err)
	}
	t.Cleanup(func() { n.Close(); _ = testutils.UnmountNS(n) })
	state := t.TempDir()
	prev := `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mac":"0a:58:c6:12:00:02","sandbox":"` + n.Path() + `"}],"ips":[{"interface":0,"address":"198.18.0.2/24","gateway":"198.18.0.1"}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["198.18.0.53"]}}`
	conf := func(extra string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"n","type":"bindery-cni","stateDir":"` + state + `"` + extra + `}`)
	}
	args := func(cmd string) *invoke.Args {
		return &invoke.Args{Command: cmd, ContainerID: "c1", NetNS: n.Path(), IfName: "eth0", Path: dir}
	}
	ctx := context.Background()
	good := `,"managedCIDRs":["198.18.0.0/15"],"runtimeConfig":{"io.kubernetes.cri.pod-annotations":{}},"prevResult":` + prev

	out, err := invoke.ExecPluginWithResult(ctx, bin, conf(good), args("ADD"), nil)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	var got, want any
	data, _ := json.Marshal(out)
	_ = json.Unmarshal(data, &got)
	_ = json.Unmarshal([]byte(prev), &want)
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("ADD result:\n got  %s\n want %s", gotJSON, wantJSON)
	}
	if err := invoke.ExecPluginWithoutResult(ctx, bin, conf(good), args("DEL"), nil); err != nil {
		t.Fatalf("DEL: %v", err)
	}

	// Host names are resolved at ADD and the addresses recorded.
	named := `,"managedCIDRs":["127.0.0.0/8"],"runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"bindery.dev/egress":"[{\"host\":\"localhost\",\"ports\":[\"5432\"]}]"}},"prevResult":` + prev
	if _, err := invoke.ExecPluginWithResult(ctx, bin, conf(named), args("ADD"), nil); err != nil {
		t.Fatalf("ADD with a host name: %v", err)
	}
	record, err := os.ReadFile(filepath.Join(state, "c1_eth0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(record), `"addr":"127.0.0.1"`) || !strings.Contains(string(record), "grants4: 127.0.0.1 . tcp . 5432") {
		t.Errorf("record of an ADD granting localhost:5432: %s", record)
	}
	if err := invoke.ExecPluginWithoutResult(ctx, bin, conf(named), args("DEL"), nil); err != nil {
		t.Fatalf("DEL: %v", err)
	}

	// DEL with a path that no longer holds a namespace, as a runtime that
	// unmounted it may pass, still removes the record.
	if _, err := invoke.ExecPluginWithResult(ctx, bin, conf(good), args("ADD"), nil); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gone := args("DEL")
	gone.NetNS = plain
	if err := invoke.ExecPluginWithoutResult(ctx, bin, conf(good), gone, nil); err != nil {
		t.Fatalf("DEL with a path that is no namespace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "c1_eth0.json")); !os.IsNotExist(err) {
		t.Errorf("record after DEL: %v", err)
	}

	// STATUS says when the plugin cannot record attachments.
	notDir := filepath.Join(state, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	statusConf := []byte(`{"cniVersion":"1.1.0","name":"n","type":"bindery-cni","managedCIDRs":["198.18.0.0/15"],"stateDir":"` + notDir + `"}`)
	err = invoke.ExecPluginWithoutResult(ctx, bin, statusConf, args("STATUS"), nil)
	var serr *types.Error
	if !errors.As(err, &serr) || serr.Code != 50 {
		t.Errorf("STATUS with a state directory that is a file: %v, want code 50 (plugin not available)", err)
	}

	for _, tc := range []struct {
		name string
		conf string
		code uint
		msg  string
	}{
		{"no managedCIDRs", `,"prevResult":` + prev, types.ErrInvalidNetworkConfig, "managedCIDRs: must list at least one range"},
		{"bad CIDR", `,"managedCIDRs":["198.18.0.0/15","nope"],"prevResult":` + prev, types.ErrInvalidNetworkConfig, `managedCIDRs[1]: "nope" is not a CIDR`},
		{"not chained", `,"managedCIDRs":["198.18.0.0/15"]`, types.ErrInvalidNetworkConfig, "prevResult: missing; bindery-cni must follow a plugin that configures the interface"},
		{"bad annotation", `,"managedCIDRs":["198.18.0.0/15"],"runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"bindery.dev/egress":"[{\"host\":\"a\",\"ports\":[\"0\"]}]"}},"prevResult":` + prev, types.ErrDecodingFailure, "Pod annotation bindery.dev/egress"},
		{"no way to read annotations", `,"managedCIDRs":["198.18.0.0/15"],"prevResult":` + prev, types.ErrInvalidNetworkConfig, "kubeconfig: needed to read the Pod's annotations, which the runtime did not pass (capability io.kubernetes.cri.pod-annotations)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := args("ADD")
			if tc.name == "no way to read annotations" {
				a.PluginArgs = [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "p"}}
			}
			_, err := invoke.ExecPluginWithResult(ctx, bin, conf(tc.conf), a, nil)
			var cerr *types.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("ADD: %v, want a CNI error", err)
			}
			if cerr.Code != tc.code || cerr.Msg != tc.msg {
				t.Errorf("ADD: code %d %q, want code %d %q", cerr.Code, cerr.Msg, tc.code, tc.msg)
			}
		})
	}
}

package nodeagent_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/nodeagent"
	"github.com/bindery-dev/bindery/nodeagent/csi"
)

// TestOptionsValidateReportsAll checks that every problem is reported in
// one error, each naming its flag.
func TestOptionsValidateReportsAll(t *testing.T) {
	var o nodeagent.Options
	err := o.Validate()
	for _, want := range []string{"--config", "--device-plugin-dir", "--listen"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	o = nodeagent.Options{Listen: ":8083", ConfigFile: "agent.yaml", DevicePluginDir: "/var/lib/kubelet/device-plugins"}
	if err := o.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// TestOptionsCSI: --csi serves without --config, and its settings are
// checked together; Config gives the driver the kubelet's directories.
func TestOptionsCSI(t *testing.T) {
	o := nodeagent.Options{Listen: ":8083", CSI: true, CSIOptions: nodeagent.CSIOptions{NodeName: "n1", KubeletDir: "/k", APIServer: "https://api:443",
		MaxVolumes: csi.DefaultMaxVolumes, MaxVolumesPerPod: csi.DefaultMaxVolumesPerPod}}
	if err := o.Validate(); err != nil {
		t.Errorf("--csi alone: %v", err)
	}
	cfg, err := o.Config(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != nil || cfg.CSI == nil || cfg.CSI.NodeID != "n1" || cfg.CSI.PluginDir != "/k/plugins/csi.bindery.dev" ||
		cfg.CSI.RegistrationDir != "/k/plugins_registry" || cfg.CSI.RefreshInterval >= 0 {
		t.Errorf("config %+v", cfg.CSI)
	}
	o = nodeagent.Options{CSI: true, CSIOptions: nodeagent.CSIOptions{NodeName: "n1", RefreshInterval: -time.Second, MaxVolumes: -1}}
	err = o.Validate()
	for _, want := range []string{"--csi-apiserver", "--csi-kubelet-dir", "--csi-refresh-interval", "--csi-max-volumes must", "--csi-max-volumes-per-pod"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

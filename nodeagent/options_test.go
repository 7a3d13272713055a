package nodeagent_test

import (
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/nodeagent"
)

// TestOptionsValidateReportsAll checks that every problem is reported in
// one error, each naming its flag.
func TestOptionsValidateReportsAll(t *testing.T) {
	var o nodeagent.Options
	err := o.Validate()
	for _, want := range []string{"--config", "--device-plugin-dir"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	o = nodeagent.Options{ConfigFile: "agent.yaml", DevicePluginDir: "/var/lib/kubelet/device-plugins"}
	if err := o.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

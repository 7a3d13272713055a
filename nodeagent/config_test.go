package nodeagent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/nodeagent"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		yaml   string
		fields []string // field paths with a problem
		err    string   // or a decoding error containing this
	}{
		{name: "the issue's form", yaml: `
devicePlugins:
  - resourceName: example.com/foo
    devices:
      - path: /some/dir/foo-*   # a glob; each match is one device
`},
		{name: "empty", yaml: ``},
		{name: "every field", yaml: `
devicePlugins:
  - resourceName: example.com/gpu
    devices:
      - path: /dev/dri/renderD*
        permissions: rw
      - path: /dev/kvm
        containerPath: /dev/kvm
    slots: 4
    mounts:
      - {hostPath: /opt/gpu/lib, containerPath: /usr/lib/gpu, readOnly: true}
    env: {GPU_MODE: fast}
    deviceIDsEnv: GPU_DEVICES
    annotations: {example.com/gpu: "yes"}
    cdiDevices: ["example.com/gpu={id}"]
    preStartContainer:
      command: [/usr/bin/gpu-reset]
      timeoutSeconds: 5
`},
		{name: "unknown field", yaml: `
devicePlugins:
  - resourceName: example.com/foo
    device: [{path: /dev/foo}]
`, err: `unknown field "device"`},
		{name: "not YAML", yaml: "devicePlugins: [", err: "decode"},
		{name: "wrong type", yaml: "devicePlugins: {}", err: "decode"},
		{name: "every problem with its path", yaml: `
devicePlugins:
  - resourceName: foo
    devices:
      - path: relative/foo
        permissions: x
  - resourceName: example.com/bar
    slots: -2
`, fields: []string{
			"devicePlugins[0].resourceName",
			"devicePlugins[0].devices[0].path",
			"devicePlugins[0].devices[0].permissions",
			"devicePlugins[1].slots",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := nodeagent.ParseConfig([]byte(tt.yaml))
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
			case tt.fields == nil:
				if err != nil {
					t.Fatal(err)
				}
			default:
				var agg utilerrors.Aggregate
				if !errors.As(err, &agg) {
					t.Fatalf("%v is not a list of field errors", err)
				}
				var got []string
				for _, e := range agg.Errors() {
					var fe *field.Error
					if !errors.As(e, &fe) {
						t.Fatalf("%v is not a field error", e)
					}
					got = append(got, fe.Field)
				}
				if strings.Join(got, " ") != strings.Join(tt.fields, " ") {
					t.Errorf("problems at %q, want %q (%v)", got, tt.fields, err)
				}
			}
		})
	}
}

func TestSampleConfigIsValid(t *testing.T) {
	t.Parallel()
	c, err := nodeagent.LoadConfig(filepath.Join("..", "deploy", "nodeagent", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.DevicePlugins) == 0 {
		t.Error("the sample configures no device plugin")
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	t.Parallel()
	_, err := nodeagent.LoadConfig(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want ErrNotExist", err)
	}
}

package deviceplugin_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	foo := func(mod func(c *deviceplugin.Config)) []deviceplugin.Config {
		c := deviceplugin.Config{ResourceName: "example.com/foo", Devices: []deviceplugin.DeviceGlob{{Path: "/dev/foo-*"}}}
		if mod != nil {
			mod(&c)
		}
		return []deviceplugin.Config{c}
	}
	tests := []struct {
		name string
		cfgs []deviceplugin.Config
		want []string // field paths with a problem, in order
	}{
		{"minimal", foo(nil), nil},
		{"none", nil, nil},
		{"everything", foo(func(c *deviceplugin.Config) {
			c.Devices = append(c.Devices, deviceplugin.DeviceGlob{Path: "/dev/kvm", ContainerPath: "/dev/kvm", Permissions: "mrw"})
			c.Slots = 4
			c.Mounts = []deviceplugin.Mount{{HostPath: "/opt/lib", ContainerPath: "/usr/lib/foo", ReadOnly: true}}
			c.Env = map[string]string{"FOO": "1", "_BAR2": ""}
			c.DeviceIDsEnv = "FOO_DEVICES"
			c.Annotations = map[string]string{"example.com/a": "b", "plain": "c"}
			c.CDIDevices = []string{"example.com/foo={id}", "vendor.io/gpu=all"}
			c.PreStartContainer = &deviceplugin.PreStart{Command: []string{"/bin/reset"}, TimeoutSeconds: 29}
		}), nil},
		{"resource name missing", foo(func(c *deviceplugin.Config) { c.ResourceName = "" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name without domain", foo(func(c *deviceplugin.Config) { c.ResourceName = "foo" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name native", foo(func(c *deviceplugin.Config) { c.ResourceName = "kubernetes.io/foo" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name native subdomain", foo(func(c *deviceplugin.Config) { c.ResourceName = "gpu.kubernetes.io/foo" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name requests", foo(func(c *deviceplugin.Config) { c.ResourceName = "requests.example.com/foo" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name upper-case domain", foo(func(c *deviceplugin.Config) { c.ResourceName = "Example.com/foo" }), []string{"devicePlugins[0].resourceName"}},
		{"resource name two slashes", foo(func(c *deviceplugin.Config) { c.ResourceName = "example.com/foo/bar" }), []string{"devicePlugins[0].resourceName"}},
		{"resource type too long", foo(func(c *deviceplugin.Config) { c.ResourceName = "example.com/" + strings.Repeat("x", 64) }), []string{"devicePlugins[0].resourceName"}},
		{"nothing to advertise", foo(func(c *deviceplugin.Config) { c.Devices = nil }), []string{"devicePlugins[0].devices"}},
		{"slots only", foo(func(c *deviceplugin.Config) { c.Devices, c.Slots = nil, 10 }), nil},
		{"slots out of range", foo(func(c *deviceplugin.Config) { c.Slots = -1 }), []string{"devicePlugins[0].slots"}},
		{"relative path", foo(func(c *deviceplugin.Config) { c.Devices[0].Path = "dev/foo" }), []string{"devicePlugins[0].devices[0].path"}},
		{"unclean path", foo(func(c *deviceplugin.Config) { c.Devices[0].Path = "/dev/../foo" }), []string{"devicePlugins[0].devices[0].path"}},
		{"bad glob", foo(func(c *deviceplugin.Config) { c.Devices[0].Path = "/dev/foo[" }), []string{"devicePlugins[0].devices[0].path"}},
		{"container path for a glob", foo(func(c *deviceplugin.Config) { c.Devices[0].ContainerPath = "/dev/foo" }), []string{"devicePlugins[0].devices[0].containerPath"}},
		{"bad permissions", foo(func(c *deviceplugin.Config) { c.Devices[0].Permissions = "rwx" }), []string{"devicePlugins[0].devices[0].permissions"}},
		{"repeated permission", foo(func(c *deviceplugin.Config) { c.Devices[0].Permissions = "rr" }), []string{"devicePlugins[0].devices[0].permissions"}},
		{"duplicate glob", foo(func(c *deviceplugin.Config) { c.Devices = append(c.Devices, c.Devices[0]) }), []string{"devicePlugins[0].devices[1].path"}},
		{"mount paths", foo(func(c *deviceplugin.Config) {
			c.Mounts = []deviceplugin.Mount{{HostPath: "opt", ContainerPath: "/x"}, {HostPath: "/opt", ContainerPath: "/x"}, {}}
		}), []string{
			"devicePlugins[0].mounts[0].hostPath", "devicePlugins[0].mounts[1].containerPath",
			"devicePlugins[0].mounts[2].hostPath", "devicePlugins[0].mounts[2].containerPath",
		}},
		{"env names", foo(func(c *deviceplugin.Config) { c.Env = map[string]string{"1X": "", "A-B": "", "OK": ""} }), []string{"devicePlugins[0].env[1X]", "devicePlugins[0].env[A-B]"}},
		{"device IDs env", foo(func(c *deviceplugin.Config) { c.DeviceIDsEnv = "X Y" }), []string{"devicePlugins[0].deviceIDsEnv"}},
		{"device IDs env clash", foo(func(c *deviceplugin.Config) { c.Env, c.DeviceIDsEnv = map[string]string{"X": ""}, "X" }), []string{"devicePlugins[0].deviceIDsEnv"}},
		{"annotation key", foo(func(c *deviceplugin.Config) { c.Annotations = map[string]string{"Bad.Domain/x": ""} }), []string{"devicePlugins[0].annotations[Bad.Domain/x]"}},
		{"CDI names", foo(func(c *deviceplugin.Config) { c.CDIDevices = []string{"foo", "example.com/foo=", "example.com/foo=ok"} }), []string{"devicePlugins[0].cdiDevices[0]", "devicePlugins[0].cdiDevices[1]"}},
		{"pre-start", foo(func(c *deviceplugin.Config) { c.PreStartContainer = &deviceplugin.PreStart{TimeoutSeconds: 30} }), []string{"devicePlugins[0].preStartContainer.command", "devicePlugins[0].preStartContainer.timeoutSeconds"}},
		{"pre-start relative command", foo(func(c *deviceplugin.Config) { c.PreStartContainer = &deviceplugin.PreStart{Command: []string{"reset"}} }), []string{"devicePlugins[0].preStartContainer.command[0]"}},
		{"duplicate resource", append(foo(nil), foo(nil)...), []string{"devicePlugins[1].resourceName"}},
		{"every problem at once", []deviceplugin.Config{
			{ResourceName: "foo", Devices: []deviceplugin.DeviceGlob{{Path: "x", Permissions: "q"}}},
			{ResourceName: "example.com/bar"},
		}, []string{
			"devicePlugins[0].resourceName", "devicePlugins[0].devices[0].path", "devicePlugins[0].devices[0].permissions",
			"devicePlugins[1].devices",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fields(deviceplugin.Validate(tt.cfgs, field.NewPath("devicePlugins"))); !slices.Equal(got, tt.want) {
				t.Errorf("problems at %q, want %q", got, tt.want)
			}
		})
	}
}

// fields lists the field paths of errs.
func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

package deviceplugin

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Config describes one device plugin: one extended resource and the node
// devices behind it. It is one entry of the node agent's YAML configuration.
type Config struct {
	// ResourceName is the extended resource Pods request, "vendor-domain/type".
	ResourceName string `json:"resourceName"`
	// Devices lists device paths; each may be a glob, and every match is one
	// device unless Slots is set. A device's ID is its path relative to the
	// glob's literal directory when there is one entry (foo-1 for
	// /dev/foo-1 matched by /dev/foo-*), else its whole path (dev_foo-1),
	// with characters other than letters, digits, '.', '_' and '-'
	// replaced by '_'.
	Devices []DeviceGlob `json:"devices,omitempty"`
	// Slots, when positive, advertises that many interchangeable slots
	// instead of one device per match; every slot hands out all the matched
	// device nodes (for nodes many Pods may share, such as /dev/fuse).
	Slots int `json:"slots,omitempty"`
	// Mounts are extra host paths mounted into every container that gets
	// a device.
	Mounts []Mount `json:"mounts,omitempty"`
	// Env is set in every container that gets a device.
	Env map[string]string `json:"env,omitempty"`
	// DeviceIDsEnv, when set, names an environment variable that receives
	// the comma-separated IDs of the devices given to the container.
	DeviceIDsEnv string `json:"deviceIDsEnv,omitempty"`
	// Annotations are passed to the container runtime with the allocation.
	Annotations map[string]string `json:"annotations,omitempty"`
	// CDIDevices are fully qualified CDI device names
	// ("vendor.com/class=name") handed to the runtime; "{id}" in a name
	// is replaced by each allocated device's ID.
	CDIDevices []string `json:"cdiDevices,omitempty"`
	// PreStartContainer, when set, runs a command on the node before a
	// container that got devices starts (the kubelet calls
	// PreStartContainer).
	PreStartContainer *PreStart `json:"preStartContainer,omitempty"`
}

// DeviceGlob selects device nodes by path.
type DeviceGlob struct {
	// Path is an absolute path or glob (path/filepath.Match syntax).
	Path string `json:"path"`
	// ContainerPath is where the device appears in the container; it
	// defaults to the matched path and may only be set when Path is not
	// a glob.
	ContainerPath string `json:"containerPath,omitempty"`
	// Permissions are the cgroup device permissions: a combination of
	// r, w and m. The default is "rw". For a mount, "r" without "w"
	// mounts the file read-only.
	Permissions string `json:"permissions,omitempty"`
	// Mount hands the matched plain files to the container as bind
	// mounts. Without it only device nodes (character or block) are
	// advertised: the runtime refuses to create anything else as a device
	// ("not a device node"), and the Pod that got it would never start.
	Mount bool `json:"mount,omitempty"`
}

// Mount is a host path mounted into the container.
type Mount struct {
	// HostPath is the absolute path on the node.
	HostPath string `json:"hostPath"`
	// ContainerPath is the absolute path in the container.
	ContainerPath string `json:"containerPath"`
	// ReadOnly mounts the path read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// PreStart is a command the node agent runs before a container with
// devices starts. The host paths of the container's devices are appended
// to its arguments, and BINDERY_RESOURCE_NAME and BINDERY_DEVICE_IDS are
// set in its environment. A non-zero exit fails the container start.
type PreStart struct {
	// Command is the absolute path of the program and its first arguments.
	Command []string `json:"command"`
	// TimeoutSeconds bounds the command; the default is 10 and it must stay
	// below the kubelet's own 30 s limit on the call.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

const (
	defaultPermissions     = "rw"
	defaultPreStartTimeout = 10
	maxSlots               = 10000
)

// FieldError is one problem in a configuration, located by its field path
// (for example devicePlugins[0].devices[1].path).
type FieldError struct {
	// Field is the path of the offending field.
	Field string
	// Detail says what is wrong.
	Detail string
}

// Error reads "field.path: what is wrong".
func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// fieldErrors collects problems under a common path.
type fieldErrors []error

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Validate checks the device plugins of a configuration found at path (the
// field path of the list, such as "devicePlugins") and returns every
// problem at once, each a *FieldError, joined; nil when all is well.
func Validate(cfgs []Config, path string) error {
	var errs fieldErrors
	seen := map[string]int{}
	for i, c := range cfgs {
		p := fmt.Sprintf("%s[%d]", path, i)
		c.validate(p, &errs)
		if c.ResourceName == "" {
			continue
		}
		if j, dup := seen[c.ResourceName]; dup {
			errs.add(p+".resourceName", "duplicate of %s[%d].resourceName %q", path, j, c.ResourceName)
		} else {
			seen[c.ResourceName] = i
		}
	}
	return errors.Join(errs...)
}

func (c *Config) validate(p string, errs *fieldErrors) {
	if c.ResourceName == "" {
		errs.add(p+".resourceName", "required")
	} else if msg := resourceNameProblem(c.ResourceName); msg != "" {
		errs.add(p+".resourceName", "%q %s", c.ResourceName, msg)
	}
	if len(c.Devices) == 0 && c.Slots == 0 {
		errs.add(p+".devices", "set devices, slots or both")
	}
	if c.Slots < 0 || c.Slots > maxSlots {
		errs.add(p+".slots", "%d is out of range 0..%d", c.Slots, maxSlots)
	}
	globs := map[string]int{}
	for i, d := range c.Devices {
		dp := fmt.Sprintf("%s.devices[%d]", p, i)
		if j, dup := globs[d.Path]; dup && d.Path != "" {
			errs.add(dp+".path", "duplicate of %s.devices[%d].path", p, j)
		}
		globs[d.Path] = i
		d.validate(dp, errs)
	}
	mounts := map[string]int{}
	for i, m := range c.Mounts {
		mp := fmt.Sprintf("%s.mounts[%d]", p, i)
		checkAbs(mp+".hostPath", m.HostPath, errs)
		checkAbs(mp+".containerPath", m.ContainerPath, errs)
		if j, dup := mounts[m.ContainerPath]; dup && m.ContainerPath != "" {
			errs.add(mp+".containerPath", "duplicate of %s.mounts[%d].containerPath", p, j)
		}
		mounts[m.ContainerPath] = i
	}
	for _, k := range sortedKeys(c.Env) {
		if !envNameRE.MatchString(k) {
			errs.add(p+".env."+k, "not a valid environment variable name")
		}
	}
	if c.DeviceIDsEnv != "" {
		if !envNameRE.MatchString(c.DeviceIDsEnv) {
			errs.add(p+".deviceIDsEnv", "%q is not a valid environment variable name", c.DeviceIDsEnv)
		} else if _, clash := c.Env[c.DeviceIDsEnv]; clash {
			errs.add(p+".deviceIDsEnv", "%q is also set in env", c.DeviceIDsEnv)
		}
	}
	for _, k := range sortedKeys(c.Annotations) {
		if msg := qualifiedNameProblem(k); msg != "" {
			errs.add(p+".annotations."+k, "key %s", msg)
		}
	}
	for i, name := range c.CDIDevices {
		if msg := cdiNameProblem(strings.ReplaceAll(name, "{id}", "x")); msg != "" {
			errs.add(fmt.Sprintf("%s.cdiDevices[%d]", p, i), "%q %s", name, msg)
		}
	}
	if ps := c.PreStartContainer; ps != nil {
		pp := p + ".preStartContainer"
		if len(ps.Command) == 0 {
			errs.add(pp+".command", "required")
		} else {
			checkAbs(pp+".command[0]", ps.Command[0], errs)
		}
		if ps.TimeoutSeconds < 0 || ps.TimeoutSeconds >= 30 {
			errs.add(pp+".timeoutSeconds", "%d is out of range 0..29 (the kubelet gives up after 30 s)", ps.TimeoutSeconds)
		}
	}
}

func (d *DeviceGlob) validate(dp string, errs *fieldErrors) {
	if checkAbs(dp+".path", d.Path, errs) {
		if _, err := filepath.Match(d.Path, ""); err != nil {
			errs.add(dp+".path", "%q is not a valid glob: %v", d.Path, err)
		}
	}
	if d.ContainerPath != "" {
		checkAbs(dp+".containerPath", d.ContainerPath, errs)
		if hasMeta(d.Path) {
			errs.add(dp+".containerPath", "may only be set when path is not a glob")
		}
	}
	if d.Permissions != "" && !validPermissions(d.Permissions) {
		errs.add(dp+".permissions", "%q must combine r, w and m, each at most once", d.Permissions)
	}
}

// checkAbs reports whether p is a clean absolute path, recording a problem
// when it is not.
func checkAbs(field, p string, errs *fieldErrors) bool {
	switch {
	case p == "":
		errs.add(field, "required")
	case !filepath.IsAbs(p):
		errs.add(field, "%q must be an absolute path", p)
	case filepath.Clean(p) != p:
		errs.add(field, "%q must be a clean path (%q)", p, filepath.Clean(p))
	default:
		return true
	}
	return false
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// Kubernetes' qualified-name and DNS-1123 subdomain rules
	// (k8s.io/apimachinery/pkg/util/validation).
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	subdomainRE = regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$`)
	// CDI names: vendor/class=name (tags.cncf.io/container-device-interface
	// pkg/parser).
	cdiVendorRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	cdiClassRE  = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?$`)
	cdiDeviceRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?$`)
)

// validPermissions accepts a non-empty combination of r, w and m, each at
// most once (the cgroup device access string).
func validPermissions(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for i, c := range s {
		if !strings.ContainsRune("rwm", c) || strings.ContainsRune(s[i+1:], c) {
			return false
		}
	}
	return true
}

// resourceNameProblem applies the kubelet's rule for device plugin
// resources (an extended resource name: a qualified name with a domain
// outside kubernetes.io that stays valid with a "requests." prefix).
func resourceNameProblem(name string) string {
	domain, _, ok := strings.Cut(name, "/")
	if !ok || domain == "" {
		return "must be vendor-domain/type"
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return "is in the kubernetes.io domain, which is reserved for native resources"
	}
	if strings.HasPrefix(domain, "requests.") {
		return `must not start with "requests."`
	}
	if msg := qualifiedNameProblem("requests." + name); msg != "" {
		return msg
	}
	return ""
}

// qualifiedNameProblem checks an optional DNS-subdomain prefix and a name
// of at most 63 characters, as Kubernetes does for label and annotation
// keys.
func qualifiedNameProblem(s string) string {
	prefix, name, hasPrefix := strings.Cut(s, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if strings.Contains(name, "/") {
		return "must have at most one '/'"
	}
	if hasPrefix && (prefix == "" || len(prefix) > 253 || !subdomainRE.MatchString(prefix)) {
		return "must have a lower-case DNS subdomain before '/'"
	}
	if name == "" || len(name) > 63 || !nameRE.MatchString(name) {
		return "must have a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

// cdiNameProblem checks a fully qualified CDI device name.
func cdiNameProblem(s string) string {
	kind, dev, ok := strings.Cut(s, "=")
	vendor, class, ok2 := strings.Cut(kind, "/")
	if !ok || !ok2 || !cdiVendorRE.MatchString(vendor) || !cdiClassRE.MatchString(class) || !cdiDeviceRE.MatchString(dev) {
		return "is not a fully qualified CDI device name (vendor.com/class=name)"
	}
	return ""
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

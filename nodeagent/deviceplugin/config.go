package deviceplugin

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// Validate checks the device plugins of a configuration found at path (the
// field path of the list, such as devicePlugins) and returns every problem
// at once, as the Kubernetes API does; empty when all is well.
func Validate(cfgs []Config, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, c := range cfgs {
		p := path.Index(i)
		errs = append(errs, c.validate(p)...)
		if c.ResourceName == "" {
			continue
		}
		if _, dup := seen[c.ResourceName]; dup {
			errs = append(errs, field.Duplicate(p.Child("resourceName"), c.ResourceName))
		} else {
			seen[c.ResourceName] = i
		}
	}
	return errs
}

func (c *Config) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.ResourceName == "" {
		errs = append(errs, field.Required(p.Child("resourceName"), "vendor-domain/type"))
	} else if msgs := resourceNameProblems(c.ResourceName); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("resourceName"), c.ResourceName, strings.Join(msgs, "; ")))
	}
	if len(c.Devices) == 0 && c.Slots == 0 {
		errs = append(errs, field.Required(p.Child("devices"), "set devices, slots or both"))
	}
	if c.Slots < 0 || c.Slots > maxSlots {
		errs = append(errs, field.Invalid(p.Child("slots"), c.Slots, fmt.Sprintf("out of range 0..%d", maxSlots)))
	}
	globs := map[string]int{}
	for i, d := range c.Devices {
		dp := p.Child("devices").Index(i)
		if _, dup := globs[d.Path]; dup && d.Path != "" {
			errs = append(errs, field.Duplicate(dp.Child("path"), d.Path))
		}
		globs[d.Path] = i
		errs = append(errs, d.validate(dp)...)
	}
	mounts := map[string]int{}
	for i, m := range c.Mounts {
		mp := p.Child("mounts").Index(i)
		errs = append(errs, checkAbs(mp.Child("hostPath"), m.HostPath)...)
		errs = append(errs, checkAbs(mp.Child("containerPath"), m.ContainerPath)...)
		if _, dup := mounts[m.ContainerPath]; dup && m.ContainerPath != "" {
			errs = append(errs, field.Duplicate(mp.Child("containerPath"), m.ContainerPath))
		}
		mounts[m.ContainerPath] = i
	}
	for _, k := range sortedKeys(c.Env) {
		if !envNameRE.MatchString(k) {
			errs = append(errs, field.Invalid(p.Child("env").Key(k), k, envNameMsg))
		}
	}
	if c.DeviceIDsEnv != "" {
		if !envNameRE.MatchString(c.DeviceIDsEnv) {
			errs = append(errs, field.Invalid(p.Child("deviceIDsEnv"), c.DeviceIDsEnv, envNameMsg))
		} else if _, clash := c.Env[c.DeviceIDsEnv]; clash {
			errs = append(errs, field.Invalid(p.Child("deviceIDsEnv"), c.DeviceIDsEnv, "is also set in env"))
		}
	}
	for _, k := range sortedKeys(c.Annotations) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), k, strings.Join(msgs, "; ")))
		}
	}
	for i, name := range c.CDIDevices {
		if !validCDIName(strings.ReplaceAll(name, "{id}", "x")) {
			errs = append(errs, field.Invalid(p.Child("cdiDevices").Index(i), name, "not a fully qualified CDI device name (vendor.com/class=name)"))
		}
	}
	if ps := c.PreStartContainer; ps != nil {
		pp := p.Child("preStartContainer")
		if len(ps.Command) == 0 {
			errs = append(errs, field.Required(pp.Child("command"), ""))
		} else {
			errs = append(errs, checkAbs(pp.Child("command").Index(0), ps.Command[0])...)
		}
		if ps.TimeoutSeconds < 0 || ps.TimeoutSeconds >= 30 {
			errs = append(errs, field.Invalid(pp.Child("timeoutSeconds"), ps.TimeoutSeconds, "out of range 0..29 (the kubelet gives up after 30 s)"))
		}
	}
	return errs
}

func (d *DeviceGlob) validate(dp *field.Path) field.ErrorList {
	errs := checkAbs(dp.Child("path"), d.Path)
	if len(errs) == 0 {
		if _, err := filepath.Match(d.Path, ""); err != nil {
			errs = append(errs, field.Invalid(dp.Child("path"), d.Path, fmt.Sprintf("not a valid glob: %v", err)))
		}
	}
	if d.ContainerPath != "" {
		errs = append(errs, checkAbs(dp.Child("containerPath"), d.ContainerPath)...)
		if hasMeta(d.Path) {
			errs = append(errs, field.Forbidden(dp.Child("containerPath"), "may only be set when path is not a glob"))
		}
	}
	if d.Permissions != "" && !validPermissions(d.Permissions) {
		errs = append(errs, field.Invalid(dp.Child("permissions"), d.Permissions, "must combine r, w and m, each at most once"))
	}
	return errs
}

// checkAbs returns the problem with p unless it is a clean absolute path.
func checkAbs(f *field.Path, p string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(f, "an absolute path")}
	case !filepath.IsAbs(p):
		return field.ErrorList{field.Invalid(f, p, "must be an absolute path")}
	case filepath.Clean(p) != p:
		return field.ErrorList{field.Invalid(f, p, fmt.Sprintf("must be a clean path (%q)", filepath.Clean(p)))}
	}
	return nil
}

const envNameMsg = "not a valid environment variable name (letters, digits and '_', not starting with a digit)"

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
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

// resourceNameProblems applies the kubelet's rule for device plugin
// resources (an extended resource name: a qualified name with a domain
// outside kubernetes.io that stays valid with a "requests." prefix).
func resourceNameProblems(name string) []string {
	domain, _, ok := strings.Cut(name, "/")
	switch {
	case !ok || domain == "":
		return []string{"must be vendor-domain/type"}
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return []string{"is in the kubernetes.io domain, which is reserved for native resources"}
	case strings.HasPrefix(domain, "requests."):
		return []string{`must not start with "requests."`}
	}
	return validation.IsQualifiedName("requests." + name)
}

// validCDIName checks a fully qualified CDI device name.
func validCDIName(s string) bool {
	kind, dev, ok := strings.Cut(s, "=")
	vendor, class, ok2 := strings.Cut(kind, "/")
	return ok && ok2 && cdiVendorRE.MatchString(vendor) && cdiClassRE.MatchString(class) && cdiDeviceRE.MatchString(dev)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

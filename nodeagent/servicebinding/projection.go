package servicebinding

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

// Names the projection writes into a Pod template. Everything it adds is
// found again through them, so that removing a binding takes away exactly
// what projecting it added, and nothing a user wrote.
const (
	// RootEnv is the environment variable under which bindings are mounted.
	RootEnv = "SERVICE_BINDING_ROOT"
	// DefaultRoot is RootEnv's value when the workload does not set it.
	DefaultRoot = "/bindings"

	// volumePrefix starts the name of the volume of one binding, followed
	// by the ServiceBinding's UID.
	volumePrefix = "servicebinding-"
	// annotationDomain holds the template annotations of the projection.
	annotationDomain = "servicebinding.bindery.dev"
	// recordPrefix + UID records, per container, the environment variables
	// that binding added (JSON object: container name → names).
	recordPrefix = annotationDomain + "/"
	// rootAnnotation lists (JSON array) the containers whose RootEnv the
	// projection added, to be removed with the last binding.
	rootAnnotation = annotationDomain + "/root"
	// typePrefix and providerPrefix + UID hold spec.type and spec.provider,
	// which the volume and env read through the downward API: the
	// specification wants them to override the Secret's entries.
	typePrefix     = "type." + annotationDomain + "/"
	providerPrefix = "provider." + annotationDomain + "/"
	// mappingPrefix + UID, an annotation of the workload itself (not of
	// its Pod template), records the mapping the binding was projected
	// with (Mapping as JSON), to be removed with the same one.
	mappingPrefix = "mapping." + annotationDomain + "/"

	// secretFileMode is the mode of the projected files, as the API server
	// would default it; written out so that projecting is a fixed point of
	// what the server stores.
	secretFileMode = int32(0o644)
)

// Binding is what one ServiceBinding projects, resolved: the Secret is known.
type Binding struct {
	// UID of the ServiceBinding; it names the volume and the annotations.
	UID types.UID
	// Name is the directory under $SERVICE_BINDING_ROOT.
	Name string
	// Secret is the name of the Secret to project.
	Secret string
	// Type and Provider override the Secret's entries when set.
	Type, Provider string
	// Env maps environment variables to Secret entries.
	Env []sbv1.EnvMapping
	// Containers limits the containers bound; all when empty. Containers
	// without a name are bound either way.
	Containers []string
}

// BindingFor resolves sb with the name of the Secret its service exposes.
func BindingFor(sb *sbv1.ServiceBinding, secret string) Binding {
	name := sb.Spec.Name
	if name == "" {
		name = sb.Name
	}
	return Binding{
		UID:        sb.UID,
		Name:       name,
		Secret:     secret,
		Type:       sb.Spec.Type,
		Provider:   sb.Spec.Provider,
		Env:        sb.Spec.Env,
		Containers: sb.Spec.Workload.Containers,
	}
}

// selects reports whether b binds container c: any container when b names
// none; else those it names, and those without a name (the mapping of
// their array has no name expression), which the specification wants
// bound when it cannot tell.
func (b Binding) selects(c *corev1.Container) bool {
	return len(b.Containers) == 0 || c.Name == "" || slices.Contains(b.Containers, c.Name)
}

// VolumeName is the name of the volume that carries b's Secret.
func VolumeName(uid types.UID) string { return volumePrefix + string(uid) }

// Projected returns the UIDs of the bindings projected into tpl.
func Projected(tpl *corev1.PodTemplateSpec) []types.UID {
	var uids []types.UID
	for k := range tpl.Annotations {
		if uid, ok := strings.CutPrefix(k, recordPrefix); ok && k != rootAnnotation {
			uids = append(uids, types.UID(uid))
		}
	}
	slices.Sort(uids)
	return uids
}

// Warning is something Project left alone because a user's value was
// there first.
type Warning struct {
	Message string
	// Unbound is set when a selected container was left without the
	// binding's mount: the binding is not projected as asked, which its
	// Ready condition must say.
	Unbound bool
}

// Project writes b into tpl, in place: the volume, in every selected
// container the mount at $SERVICE_BINDING_ROOT/<name> (setting the variable
// to DefaultRoot where the container does not set it) and the environment
// variables of b.Env. Projecting again changes nothing; projecting a changed
// b updates the entries where they are, so the template's order is stable.
// It returns warnings: things the projection left alone because a user's
// value was there first.
func Project(tpl *corev1.PodTemplateSpec, b Binding) []Warning {
	var warnings []Warning
	old := readRecord(tpl, b.UID)
	record := map[string][]string{}
	volume := VolumeName(b.UID)

	upsertVolume(&tpl.Spec.Volumes, bindingVolume(b))
	setAnnotation(tpl, typePrefix+string(b.UID), b.Type)
	setAnnotation(tpl, providerPrefix+string(b.UID), b.Provider)

	roots := readRoots(tpl)
	forEachContainer(tpl, func(c *corev1.Container) {
		if !b.selects(c) {
			removeMount(c, volume)
			removeEnv(c, old[c.Name])
			return
		}
		root, ok := rootOf(c)
		if !ok {
			root = DefaultRoot
			c.Env = append(c.Env, corev1.EnvVar{Name: RootEnv, Value: DefaultRoot})
			roots = appendUnique(roots, c.Name)
		} else if root == "" {
			warnings = append(warnings, Warning{Message: fmt.Sprintf("container %q sets %s from a reference; mounting under %s", c.Name, RootEnv, DefaultRoot)})
			root = DefaultRoot
		}
		mount := corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: path.Join(root, b.Name)}
		// The API server refuses two mounts at one path, and with it the
		// whole workload: the user's volume stays, the binding goes.
		if other := mountAt(c, mount.MountPath, volume); other != "" {
			warnings = append(warnings, Warning{Unbound: true,
				Message: fmt.Sprintf("container %q already mounts volume %q at %s; the binding is not mounted there", c.Name, other, mount.MountPath)})
			removeMount(c, volume)
		} else {
			upsertMount(c, mount)
		}

		var added []string
		for _, m := range b.Env {
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m.Name })
			if i >= 0 && !slices.Contains(old[c.Name], m.Name) {
				warnings = append(warnings, Warning{Message: fmt.Sprintf("container %q already sets %s; left as it is", c.Name, m.Name)})
				continue
			}
			e := bindingEnv(b, m)
			if i >= 0 {
				c.Env[i] = e
			} else {
				c.Env = append(c.Env, e)
			}
			added = append(added, m.Name)
		}
		var stale []string
		for _, name := range old[c.Name] {
			if !slices.Contains(added, name) {
				stale = append(stale, name)
			}
		}
		removeEnv(c, stale)
		record[c.Name] = added
	})
	writeRoots(tpl, roots)
	writeRecord(tpl, b.UID, record)
	cleanRoots(tpl)
	return warnings
}

// Unproject removes from tpl what Project(tpl, b) added for the binding
// with this UID, and $SERVICE_BINDING_ROOT from the containers where the
// projection set it and no binding is left.
func Unproject(tpl *corev1.PodTemplateSpec, uid types.UID) {
	old := readRecord(tpl, uid)
	volume := VolumeName(uid)
	tpl.Spec.Volumes = slices.DeleteFunc(tpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
	if len(tpl.Spec.Volumes) == 0 {
		tpl.Spec.Volumes = nil
	}
	forEachContainer(tpl, func(c *corev1.Container) {
		removeMount(c, volume)
		removeEnv(c, old[c.Name])
	})
	for _, k := range []string{recordPrefix, typePrefix, providerPrefix} {
		delete(tpl.Annotations, k+string(uid))
	}
	cleanRoots(tpl)
	if len(tpl.Annotations) == 0 {
		tpl.Annotations = nil
	}
}

func bindingVolume(b Binding) corev1.Volume {
	sources := []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: b.Secret},
	}}}
	// The downward API files come after the Secret and so replace its
	// entries of the same name.
	if b.Type != "" {
		sources = append(sources, annotationFile("type", typePrefix+string(b.UID)))
	}
	if b.Provider != "" {
		sources = append(sources, annotationFile("provider", providerPrefix+string(b.UID)))
	}
	mode := secretFileMode
	return corev1.Volume{
		Name: VolumeName(b.UID),
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: sources, DefaultMode: &mode,
		}},
	}
}

func annotationFile(file, annotation string) corev1.VolumeProjection {
	return corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{
		Items: []corev1.DownwardAPIVolumeFile{{Path: file, FieldRef: annotationRef(annotation)}},
	}}
}

func annotationRef(annotation string) *corev1.ObjectFieldSelector {
	return &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s']", annotation)}
}

func bindingEnv(b Binding, m sbv1.EnvMapping) corev1.EnvVar {
	switch {
	case m.Key == "type" && b.Type != "":
		return corev1.EnvVar{Name: m.Name, ValueFrom: &corev1.EnvVarSource{FieldRef: annotationRef(typePrefix + string(b.UID))}}
	case m.Key == "provider" && b.Provider != "":
		return corev1.EnvVar{Name: m.Name, ValueFrom: &corev1.EnvVarSource{FieldRef: annotationRef(providerPrefix + string(b.UID))}}
	}
	return corev1.EnvVar{Name: m.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: b.Secret}, Key: m.Key,
	}}}
}

// forEachContainer visits the init containers and the containers: the
// specification binds both.
func forEachContainer(tpl *corev1.PodTemplateSpec, f func(*corev1.Container)) {
	for i := range tpl.Spec.InitContainers {
		f(&tpl.Spec.InitContainers[i])
	}
	for i := range tpl.Spec.Containers {
		f(&tpl.Spec.Containers[i])
	}
}

// rootOf returns the container's RootEnv: ok is false when unset, and the
// value is empty when it comes from a reference the projection cannot read.
func rootOf(c *corev1.Container) (string, bool) {
	for _, e := range c.Env {
		if e.Name == RootEnv {
			return e.Value, true
		}
	}
	return "", false
}

func upsertVolume(vs *[]corev1.Volume, v corev1.Volume) {
	if i := slices.IndexFunc(*vs, func(x corev1.Volume) bool { return x.Name == v.Name }); i >= 0 {
		(*vs)[i] = v
		return
	}
	*vs = append(*vs, v)
}

func upsertMount(c *corev1.Container, m corev1.VolumeMount) {
	if i := slices.IndexFunc(c.VolumeMounts, func(x corev1.VolumeMount) bool { return x.Name == m.Name }); i >= 0 {
		c.VolumeMounts[i] = m
		return
	}
	c.VolumeMounts = append(c.VolumeMounts, m)
}

// mountAt names another volume mounted at p in c, if any.
func mountAt(c *corev1.Container, p, volume string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == p && m.Name != volume {
			return m.Name
		}
	}
	return ""
}

func removeMount(c *corev1.Container, volume string) {
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume })
	if len(c.VolumeMounts) == 0 {
		c.VolumeMounts = nil
	}
}

func removeEnv(c *corev1.Container, names []string) {
	if len(names) == 0 {
		return
	}
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return slices.Contains(names, e.Name) })
	if len(c.Env) == 0 {
		c.Env = nil
	}
}

// cleanRoots removes RootEnv from the containers where the projection set
// it and that no longer mount a binding.
func cleanRoots(tpl *corev1.PodTemplateSpec) {
	roots := readRoots(tpl)
	var kept []string
	forEachContainer(tpl, func(c *corev1.Container) {
		if !slices.Contains(roots, c.Name) {
			return
		}
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(m.Name, volumePrefix) }) {
			kept = append(kept, c.Name)
			return
		}
		removeEnv(c, []string{RootEnv})
	})
	writeRoots(tpl, kept)
}

func setAnnotation(tpl *corev1.PodTemplateSpec, key, value string) {
	if value == "" {
		delete(tpl.Annotations, key)
		return
	}
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	tpl.Annotations[key] = value
}

// readRecord returns what the binding added, per container; a record that
// does not parse (written by hand) counts as empty, so nothing a user wrote
// is ever removed on its say.
func readRecord(tpl *corev1.PodTemplateSpec, uid types.UID) map[string][]string {
	var r map[string][]string
	if s, ok := tpl.Annotations[recordPrefix+string(uid)]; ok {
		_ = json.Unmarshal([]byte(s), &r)
	}
	return r
}

func writeRecord(tpl *corev1.PodTemplateSpec, uid types.UID, r map[string][]string) {
	for k, v := range r {
		if len(v) == 0 {
			delete(r, k)
		}
	}
	data, _ := json.Marshal(r) // a map of strings always encodes
	setAnnotation(tpl, recordPrefix+string(uid), string(data))
}

func readRoots(tpl *corev1.PodTemplateSpec) []string {
	var roots []string
	if s, ok := tpl.Annotations[rootAnnotation]; ok {
		_ = json.Unmarshal([]byte(s), &roots)
	}
	return roots
}

func writeRoots(tpl *corev1.PodTemplateSpec, roots []string) {
	if len(roots) == 0 {
		delete(tpl.Annotations, rootAnnotation)
		return
	}
	slices.Sort(roots)
	data, _ := json.Marshal(roots)
	setAnnotation(tpl, rootAnnotation, string(data))
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

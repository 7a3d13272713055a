package servicebinding

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

// Mapping says where a workload keeps the parts of a Pod template that a
// projection touches, as parsed fixed paths (field names from the root).
// It is a ClusterWorkloadResourceMapping's template for one version. Its
// JSON form is the record of the mapping a binding was projected with.
type Mapping struct {
	Annotations []string           `json:"annotations"`
	Volumes     []string           `json:"volumes"`
	Containers  []ContainerMapping `json:"containers"`
}

// ContainerMapping locates one array of container-like objects.
type ContainerMapping struct {
	// Path is the location of the array.
	Path []string `json:"path"`
	// Name, Env and VolumeMounts are relative to one element; Name may be
	// empty (the container then has no name and is always bound).
	Name         []string `json:"name,omitempty"`
	Env          []string `json:"env"`
	VolumeMounts []string `json:"volumeMounts"`
}

// podSpecable is the specification's default: the Pod template at .spec.template.
var podSpecable = Mapping{
	Annotations: []string{"spec", "template", "metadata", "annotations"},
	Volumes:     []string{"spec", "template", "spec", "volumes"},
	Containers: []ContainerMapping{
		{Path: []string{"spec", "template", "spec", "initContainers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
		{Path: []string{"spec", "template", "spec", "containers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
	},
}

// builtIn holds the mappings of the kinds whose Pod template is elsewhere
// than .spec.template; a ClusterWorkloadResourceMapping overrides them.
var builtIn = map[schema.GroupKind]Mapping{
	{Group: "", Kind: "Pod"}: {
		Annotations: []string{"metadata", "annotations"},
		Volumes:     []string{"spec", "volumes"},
		Containers: []ContainerMapping{
			{Path: []string{"spec", "initContainers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
			{Path: []string{"spec", "containers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
		},
	},
	{Group: "batch", Kind: "CronJob"}: {
		Annotations: []string{"spec", "jobTemplate", "spec", "template", "metadata", "annotations"},
		Volumes:     []string{"spec", "jobTemplate", "spec", "template", "spec", "volumes"},
		Containers: []ContainerMapping{
			{Path: []string{"spec", "jobTemplate", "spec", "template", "spec", "initContainers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
			{Path: []string{"spec", "jobTemplate", "spec", "template", "spec", "containers"}, Name: []string{"name"}, Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}},
		},
	},
}

// MappingFor returns the mapping of kind gk at version: cwrm's template
// for that version (or its "*" template) when cwrm is not nil, else the
// built-in mapping of Pod and CronJob, else the PodSpec-able default.
func MappingFor(gk schema.GroupKind, version string, cwrm *sbv1.ClusterWorkloadResourceMapping) (Mapping, error) {
	if cwrm == nil {
		if m, ok := builtIn[gk]; ok {
			return m, nil
		}
		return podSpecable, nil
	}
	i := slices.IndexFunc(cwrm.Spec.Versions, func(t sbv1.ClusterWorkloadResourceMappingTemplate) bool { return t.Version == version })
	if i < 0 {
		i = slices.IndexFunc(cwrm.Spec.Versions, func(t sbv1.ClusterWorkloadResourceMappingTemplate) bool { return t.Version == "*" })
	}
	if i < 0 {
		return podSpecable, nil
	}
	m, err := ParseMapping(cwrm.Spec.Versions[i])
	if err != nil {
		return Mapping{}, fmt.Errorf("clusterworkloadresourcemapping %s: %w", cwrm.Name, err)
	}
	return m, nil
}

// ParseMapping parses a mapping template, filling in the PodSpec-able
// defaults where it is silent. Container paths must be a fixed path to an
// array followed by [*]: the projection writes back where it read.
func ParseMapping(t sbv1.ClusterWorkloadResourceMappingTemplate) (Mapping, error) {
	m := podSpecable
	var err error
	if t.Annotations != "" {
		if m.Annotations, err = fixedPath("annotations", t.Annotations); err != nil {
			return Mapping{}, err
		}
	}
	if t.Volumes != "" {
		if m.Volumes, err = fixedPath("volumes", t.Volumes); err != nil {
			return Mapping{}, err
		}
	}
	if len(t.Containers) == 0 {
		return m, nil
	}
	m.Containers = nil
	for i, c := range t.Containers {
		field := fmt.Sprintf("containers[%d]", i)
		cm := ContainerMapping{Env: []string{"env"}, VolumeMounts: []string{"volumeMounts"}}
		if cm.Path, err = arrayPath(field+".path", c.Path); err != nil {
			return Mapping{}, err
		}
		if c.Name != "" {
			if cm.Name, err = fixedPath(field+".name", c.Name); err != nil {
				return Mapping{}, err
			}
		}
		if c.Env != "" {
			if cm.Env, err = fixedPath(field+".env", c.Env); err != nil {
				return Mapping{}, err
			}
		}
		if c.VolumeMounts != "" {
			if cm.VolumeMounts, err = fixedPath(field+".volumeMounts", c.VolumeMounts); err != nil {
				return Mapping{}, err
			}
		}
		m.Containers = append(m.Containers, cm)
	}
	return m, nil
}

// fixedPath parses a Fixed JSONPath: fields joined by the child operator.
func fixedPath(field, expr string) ([]string, error) {
	nodes, err := parsePath(field, expr)
	if err != nil {
		return nil, err
	}
	var fields []string
	for _, n := range nodes {
		f, ok := n.(*jsonpath.FieldNode)
		if !ok || f.Value == "" {
			return nil, fmt.Errorf("%s: %q is not a fixed JSONPath (fields only)", field, expr)
		}
		fields = append(fields, f.Value)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s: %q is empty", field, expr)
	}
	return fields, nil
}

// arrayPath parses a fixed path followed by [*].
func arrayPath(field, expr string) ([]string, error) {
	nodes, err := parsePath(field, expr)
	if err != nil {
		return nil, err
	}
	last := len(nodes) - 1
	a, ok := nodes[last].(*jsonpath.ArrayNode)
	if !ok || a.Params[0].Known || a.Params[1].Known || a.Params[2].Known || last == 0 {
		return nil, fmt.Errorf("%s: %q must be a fixed JSONPath followed by [*]", field, expr)
	}
	var fields []string
	for _, n := range nodes[:last] {
		f, ok := n.(*jsonpath.FieldNode)
		if !ok || f.Value == "" {
			return nil, fmt.Errorf("%s: %q must be a fixed JSONPath followed by [*]", field, expr)
		}
		fields = append(fields, f.Value)
	}
	return fields, nil
}

func parsePath(field, expr string) ([]jsonpath.Node, error) {
	p, err := jsonpath.Parse(field, "{"+expr+"}")
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w", field, expr, err)
	}
	if len(p.Root.Nodes) != 1 {
		return nil, fmt.Errorf("%s: %q is not a single path", field, expr)
	}
	list, ok := p.Root.Nodes[0].(*jsonpath.ListNode)
	if !ok || len(list.Nodes) == 0 {
		return nil, fmt.Errorf("%s: %q is not a path", field, expr)
	}
	return list.Nodes, nil
}

// Template reads the parts of obj that m locates into a Pod template. All
// containers, whatever array they come from, are in Spec.Containers in the
// order of m.Containers, which WriteTemplate relies on.
func Template(obj map[string]any, m Mapping) (*corev1.PodTemplateSpec, error) {
	tpl := &corev1.PodTemplateSpec{}
	ann, err := nestedStringMap(obj, m.Annotations)
	if err != nil {
		return nil, fmt.Errorf("read annotations: %w", err)
	}
	tpl.Annotations = ann
	if err := fromNested(obj, m.Volumes, &tpl.Spec.Volumes); err != nil {
		return nil, fmt.Errorf("read volumes: %w", err)
	}
	for _, cm := range m.Containers {
		items, err := nestedSlice(obj, cm.Path)
		if err != nil {
			return nil, fmt.Errorf("read containers: %w", err)
		}
		for _, item := range items {
			c, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("read containers: element of %v is not an object", cm.Path)
			}
			var ctr corev1.Container
			if len(cm.Name) > 0 {
				ctr.Name, _, _ = unstructured.NestedString(c, cm.Name...)
			}
			if err := fromNested(c, cm.Env, &ctr.Env); err != nil {
				return nil, fmt.Errorf("read env of container %q: %w", ctr.Name, err)
			}
			if err := fromNested(c, cm.VolumeMounts, &ctr.VolumeMounts); err != nil {
				return nil, fmt.Errorf("read volumeMounts of container %q: %w", ctr.Name, err)
			}
			tpl.Spec.Containers = append(tpl.Spec.Containers, ctr)
		}
	}
	return tpl, nil
}

// WriteTemplate writes tpl, as read by Template and then changed, back into
// obj; fields outside the mapping's fragments are left as they are.
func WriteTemplate(obj map[string]any, m Mapping, tpl *corev1.PodTemplateSpec) error {
	if len(tpl.Annotations) == 0 {
		removeField(obj, m.Annotations)
	} else {
		ann := make(map[string]any, len(tpl.Annotations))
		for k, v := range tpl.Annotations {
			ann[k] = v
		}
		if err := setNested(obj, ann, m.Annotations); err != nil {
			return fmt.Errorf("write annotations: %w", err)
		}
	}
	if err := toNested(obj, m.Volumes, tpl.Spec.Volumes); err != nil {
		return fmt.Errorf("write volumes: %w", err)
	}
	next := 0
	for _, cm := range m.Containers {
		items, err := nestedSlice(obj, cm.Path)
		if err != nil || items == nil {
			continue
		}
		for i := range items {
			c := items[i].(map[string]any)
			ctr := tpl.Spec.Containers[next]
			next++
			if err := toNested(c, cm.Env, ctr.Env); err != nil {
				return fmt.Errorf("write env of container %q: %w", ctr.Name, err)
			}
			if err := toNested(c, cm.VolumeMounts, ctr.VolumeMounts); err != nil {
				return fmt.Errorf("write volumeMounts of container %q: %w", ctr.Name, err)
			}
		}
		// The containers were changed in place: items is obj's own array.
	}
	return nil
}

func fromNested[T any](obj map[string]any, path []string, out *[]T) error {
	items, err := nestedSlice(obj, path)
	if err != nil || items == nil {
		return err
	}
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("element of %v is not an object", path)
		}
		var v T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &v); err != nil {
			return err
		}
		*out = append(*out, v)
	}
	return nil
}

func toNested[T any](obj map[string]any, path []string, in []T) error {
	if len(in) == 0 {
		removeField(obj, path)
		return nil
	}
	items := make([]any, 0, len(in))
	for i := range in {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&in[i])
		if err != nil {
			return err
		}
		items = append(items, m)
	}
	return setNested(obj, items, path)
}

// nestedSlice returns the array at path in obj, nil when there is none
// (or null); a value of another type is an error naming the path.
func nestedSlice(obj map[string]any, path []string) ([]any, error) {
	v, ok := lookup(obj, path)
	if !ok {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(".%s: %T, want an array", strings.Join(path, "."), v)
	}
	return items, nil
}

// nestedStringMap returns the object of strings at path in obj, nil when
// there is none (or null).
func nestedStringMap(obj map[string]any, path []string) (map[string]string, error) {
	v, ok := lookup(obj, path)
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(".%s: %T, want an object", strings.Join(path, "."), v)
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf(".%s[%q]: %T, want a string", strings.Join(path, "."), k, e)
		}
		out[k] = s
	}
	return out, nil
}

// setNested sets the value at path in obj, making the objects on the way
// that are missing or null.
func setNested(obj map[string]any, value any, path []string) error {
	cur := obj
	for i, k := range path[:len(path)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			if cur[k] != nil {
				return fmt.Errorf(".%s: %T, want an object", strings.Join(path[:i+1], "."), cur[k])
			}
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = value
	return nil
}

// removeField removes the field at path and then the objects on the way
// to it that it leaves empty, which the projection created.
func removeField(obj map[string]any, path []string) {
	unstructured.RemoveNestedField(obj, path...)
	for i := len(path) - 1; i > 0; i-- {
		parent, found, err := unstructured.NestedMap(obj, path[:i]...)
		if err != nil || !found || len(parent) > 0 {
			return
		}
		unstructured.RemoveNestedField(obj, path[:i]...)
	}
}

// lookupMapping returns the mapping of a workload kind: its
// ClusterWorkloadResourceMapping, named <resource>.<group>, when one
// exists, else the built-in or default one.
func lookupMapping(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) (Mapping, error) {
	var cwrm sbv1.ClusterWorkloadResourceMapping
	// Read only (MappingFor parses it into a Mapping of its own): no copy.
	err := r.Get(ctx, client.ObjectKey{Name: gvr.GroupResource().String()}, &cwrm, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return MappingFor(gvk.GroupKind(), gvk.Version, nil)
	case err != nil:
		return Mapping{}, fmt.Errorf("get clusterworkloadresourcemapping %s: %w", gvr.GroupResource(), err)
	}
	return MappingFor(gvk.GroupKind(), gvk.Version, &cwrm)
}

// equalTemplates compares templates as the API server would store them.
func equalTemplates(a, b *corev1.PodTemplateSpec) bool { return equality.Semantic.DeepEqual(a, b) }

package servicebinding

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The specification (Workload Resource Mapping, Runtime Behavior) wants a
// projection removed with the mapping it was made with, and, after a
// ClusterWorkloadResourceMapping changes, each binding removed and then
// projected again with the new one. A workload read with a mapping other
// than its projection's shows only part of it: mounts left in arrays the
// new mapping does not cover outlive their volume, and the API server
// refuses every update of the workload from then on. So each projection
// records its mapping in the workload's own annotations, which are where
// they are whatever the mapping says, and is removed with it.

// workloadAnnotations is where every object keeps its own annotations.
var workloadAnnotations = []string{"metadata", "annotations"}

// projectWorkload projects b into the workload obj of kind gk with mapping
// m, first removing a projection of b made with another mapping, and
// records m. It reports whether obj changed, and Project's warnings.
func projectWorkload(obj map[string]any, gk schema.GroupKind, m Mapping, b Binding) (bool, []Warning, error) {
	changed := false
	if old, ok := recordedMapping(obj, b.UID); ok && !sameMapping(old, m) {
		var err error
		if changed, err = unprojectWith(obj, old, b.UID); err != nil {
			return false, nil, err
		}
	}
	tpl, err := Template(obj, m)
	if err != nil {
		return false, nil, err
	}
	before := tpl.DeepCopy()
	warnings := Project(tpl, b)
	if !equalTemplates(before, tpl) {
		if err := WriteTemplate(obj, m, tpl); err != nil {
			return false, nil, err
		}
		changed = true
	}
	// Recorded after the template is written: for a Pod, the template's
	// annotations are the object's own.
	if !immutable(gk) {
		recorded, err := recordMapping(obj, b.UID, m)
		if err != nil {
			return false, nil, err
		}
		changed = changed || recorded
	}
	return changed, warnings, nil
}

// unprojectWorkload removes binding uid's projection from the workload obj
// with the mapping it was made with, or with m when none is recorded (a
// projection made before mappings were recorded), and its record. It
// reports whether obj changed.
func unprojectWorkload(obj map[string]any, m Mapping, uid types.UID) (bool, error) {
	if old, ok := recordedMapping(obj, uid); ok {
		m = old
	}
	changed, err := unprojectWith(obj, m, uid)
	if err != nil {
		return false, err
	}
	if ann, _ := nestedStringMap(obj, workloadAnnotations); ann != nil {
		if _, ok := ann[mappingPrefix+string(uid)]; ok {
			delete(ann, mappingPrefix+string(uid))
			if err := writeWorkloadAnnotations(obj, ann); err != nil {
				return false, err
			}
			changed = true
		}
	}
	return changed, nil
}

// unprojectWith removes binding uid's projection from obj as mapping m
// locates it.
func unprojectWith(obj map[string]any, m Mapping, uid types.UID) (bool, error) {
	tpl, err := Template(obj, m)
	if err != nil {
		return false, err
	}
	before := tpl.DeepCopy()
	Unproject(tpl, uid)
	if equalTemplates(before, tpl) {
		return false, nil
	}
	return true, WriteTemplate(obj, m, tpl)
}

// recordedMapping returns the mapping binding uid was projected into obj
// with. A record that does not parse (written by hand) counts as none.
func recordedMapping(obj map[string]any, uid types.UID) (Mapping, bool) {
	ann, _ := nestedStringMap(obj, workloadAnnotations)
	s, ok := ann[mappingPrefix+string(uid)]
	if !ok {
		return Mapping{}, false
	}
	var m Mapping
	if err := json.Unmarshal([]byte(s), &m); err != nil || !m.complete() {
		return Mapping{}, false
	}
	return m, true
}

// complete reports whether every path of m that Template and WriteTemplate
// follow is there (a container's name may not be).
func (m Mapping) complete() bool {
	if len(m.Annotations) == 0 || len(m.Volumes) == 0 {
		return false
	}
	for _, c := range m.Containers {
		if len(c.Path) == 0 || len(c.Env) == 0 || len(c.VolumeMounts) == 0 {
			return false
		}
	}
	return true
}

// recordMapping records m as binding uid's mapping in obj, reporting
// whether the record changed.
func recordMapping(obj map[string]any, uid types.UID, m Mapping) (bool, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	ann, err := nestedStringMap(obj, workloadAnnotations)
	if err != nil {
		return false, err
	}
	if ann[mappingPrefix+string(uid)] == string(data) {
		return false, nil
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[mappingPrefix+string(uid)] = string(data)
	return true, writeWorkloadAnnotations(obj, ann)
}

func writeWorkloadAnnotations(obj map[string]any, ann map[string]string) error {
	if len(ann) == 0 {
		removeField(obj, workloadAnnotations)
		return nil
	}
	out := make(map[string]any, len(ann))
	for k, v := range ann {
		out[k] = v
	}
	return setNested(obj, out, workloadAnnotations)
}

// sameMapping reports whether a and b locate the same fields.
func sameMapping(a, b Mapping) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

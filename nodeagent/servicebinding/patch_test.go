package servicebinding

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

// TestPatchFields projects and unprojects bindings into workloads of
// several shapes, and checks that the patch the webhook answers with,
// applied to the workload as it came, gives exactly the projected
// workload: fields added where their parents are missing or null,
// replaced, and removed with the parents the projection leaves empty.
func TestPatchFields(t *testing.T) {
	t.Parallel()
	b := Binding{UID: "u1", Name: "db", Secret: "db-creds", Env: []sbv1.EnvMapping{{Name: "DB_URI", Key: "uri"}}}
	project := func(tpl *corev1.PodTemplateSpec) { Project(tpl, b) }
	unproject := func(tpl *corev1.PodTemplateSpec) { Unproject(tpl, b.UID) }
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	pod := schema.GroupKind{Kind: "Pod"}
	cronJob := schema.GroupKind{Group: "batch", Kind: "CronJob"}
	tests := []struct {
		name   string
		kind   schema.GroupKind
		object string
		change func(*corev1.PodTemplateSpec)
		// unchanged says the patch must be nil.
		unchanged bool
	}{
		{name: "a Deployment whose template has no metadata", kind: deployment, change: project,
			object: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"x","ports":[{"containerPort":8080}]}]}}}}`},
		{name: "a Deployment with annotations, volumes, env and mounts of its own", kind: deployment, change: project,
			object: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"metadata":{"labels":{"a":"b"},"annotations":{"x/y":"z"}},"spec":{"volumes":[{"name":"v","emptyDir":{}}],"initContainers":[{"name":"init","image":"x"}],"containers":[{"name":"app","image":"x","env":[{"name":"A","value":"1"}],"volumeMounts":[{"name":"v","mountPath":"/v"}]}]}}}}`},
		{name: "null fields", kind: deployment, change: project,
			object: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"metadata":null,"spec":{"volumes":null,"containers":[{"name":"app","image":"x","env":null}]}}}}`},
		{name: "a Pod", kind: pod, change: project,
			object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"name":"app","image":"x"},{"name":"sidecar","image":"y"}]}}`},
		{name: "a CronJob", kind: cronJob, change: project,
			object: `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"x"}]}}}}}}`},
		{name: "projected already", kind: deployment, change: project, unchanged: true},
		{name: "unprojected, leaving the template's metadata empty", kind: deployment, change: unproject},
		{name: "unprojected, keeping what was there before", kind: deployment, change: unproject},
	}
	var projectedOnce, projectedWithOwn []byte
	for i, tt := range tests {
		// The last three start from what earlier cases made.
		switch i {
		case 5, 6:
			tt.object = string(projectedOnce)
		case 7:
			tt.object = string(projectedWithOwn)
		}
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tt.object), &obj); err != nil {
				t.Fatal(err)
			}
			m, _ := MappingFor(tt.kind, "v1", nil)
			tpl, err := Template(obj, m)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(tpl)
			fields, err := snapshotFields(obj, fieldPaths(m))
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteTemplate(obj, m, tpl); err != nil {
				t.Fatal(err)
			}
			patch, err := patchFields(obj, fields)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(obj)
			switch i {
			case 0:
				projectedOnce = want
			case 1:
				projectedWithOwn = want
			}
			if tt.unchanged {
				if patch != nil {
					t.Errorf("patch %s for a workload that did not change", patch)
				}
				return
			}
			if patch == nil {
				t.Fatal("no patch")
			}
			p, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				t.Fatalf("decode %s: %v", patch, err)
			}
			got, err := p.Apply([]byte(tt.object))
			if err != nil {
				t.Fatalf("apply %s: %v", patch, err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("patch %s\n gives %s\n want  %s", patch, got, want)
			}
		})
	}
}

func TestPointer(t *testing.T) {
	t.Parallel()
	if got := pointer([]string{"metadata", "annotations", "a/b~c"}); got != "/metadata/annotations/a~1b~0c" {
		t.Errorf("pointer = %s", got)
	}
}

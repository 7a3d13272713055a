package servicebinding

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

const uid = "0b5f7b3a-6f0e-4c1e-9a43-7f7c2e1b9d11"

func template(containers ...corev1.Container) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}
}

func mode() *int32 { m := secretFileMode; return &m }

func secretVolume(secret string, extra ...corev1.VolumeProjection) corev1.Volume {
	return corev1.Volume{Name: VolumeName(uid), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: mode(),
		Sources: append([]corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}, extra...),
	}}}
}

func mount(p string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: VolumeName(uid), ReadOnly: true, MountPath: p}
}

func rootEnv(v string) corev1.EnvVar { return corev1.EnvVar{Name: RootEnv, Value: v} }

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// TestProject follows the examples of the specification's Workload
// Projection and Service Binding sections.
func TestProject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       *corev1.PodTemplateSpec
		binding  Binding
		want     *corev1.PodTemplateSpec
		warnings []Warning
	}{{
		// Minimal Example Resource: the directory is the binding's name and
		// SERVICE_BINDING_ROOT is set to /bindings.
		name:    "minimal",
		in:      template(corev1.Container{Name: "app"}),
		binding: Binding{UID: uid, Name: "account-service", Secret: "prod-account-service"},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{recordPrefix + uid: "{}", rootAnnotation: `["app"]`}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("prod-account-service")},
				Containers: []corev1.Container{{Name: "app",
					Env:          []corev1.EnvVar{rootEnv("/bindings")},
					VolumeMounts: []corev1.VolumeMount{mount("/bindings/account-service")}}},
			},
		},
	}, {
		name:    "root kept when set",
		in:      template(corev1.Container{Name: "app", Env: []corev1.EnvVar{rootEnv("/var/run/bindings")}}),
		binding: Binding{UID: uid, Name: "db", Secret: "s"},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{recordPrefix + uid: "{}"}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s")},
				Containers: []corev1.Container{{Name: "app",
					Env:          []corev1.EnvVar{rootEnv("/var/run/bindings")},
					VolumeMounts: []corev1.VolumeMount{mount("/var/run/bindings/db")}}},
			},
		},
	}, {
		// Environment Variables Example Resource.
		name: "env",
		in:   template(corev1.Container{Name: "app"}),
		binding: Binding{UID: uid, Name: "account-service", Secret: "s", Env: []sbv1.EnvMapping{
			{Name: "ACCOUNT_SERVICE_HOST", Key: "host"}, {Name: "ACCOUNT_SERVICE_PASSWORD", Key: "password"}}},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{
				recordPrefix + uid: `{"app":["ACCOUNT_SERVICE_HOST","ACCOUNT_SERVICE_PASSWORD"]}`, rootAnnotation: `["app"]`}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s")},
				Containers: []corev1.Container{{Name: "app",
					Env: []corev1.EnvVar{rootEnv("/bindings"),
						secretEnv("ACCOUNT_SERVICE_HOST", "s", "host"), secretEnv("ACCOUNT_SERVICE_PASSWORD", "s", "password")},
					VolumeMounts: []corev1.VolumeMount{mount("/bindings/account-service")}}},
			},
		},
	}, {
		// spec.type and spec.provider override the Secret's entries, in the
		// files and in the environment.
		name: "type and provider overrides",
		in:   template(corev1.Container{Name: "app"}),
		binding: Binding{UID: uid, Name: "db", Secret: "s", Type: "postgresql", Provider: "bindery",
			Env: []sbv1.EnvMapping{{Name: "DB_TYPE", Key: "type"}}},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{
				recordPrefix + uid: `{"app":["DB_TYPE"]}`, rootAnnotation: `["app"]`,
				typePrefix + uid: "postgresql", providerPrefix + uid: "bindery"}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s",
					annotationFile("type", typePrefix+uid), annotationFile("provider", providerPrefix+uid))},
				Containers: []corev1.Container{{Name: "app",
					Env: []corev1.EnvVar{rootEnv("/bindings"), {Name: "DB_TYPE", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + typePrefix + uid + "']"}}}},
					VolumeMounts: []corev1.VolumeMount{mount("/bindings/db")}}},
			},
		},
	}, {
		// workload.containers: a named container is bound, a name that
		// matches none is ignored, the others are left alone.
		name: "containers filter",
		in: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "sidecar"}}}},
		binding: Binding{UID: uid, Name: "db", Secret: "s", Containers: []string{"migrate", "app", "nowhere"}},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{recordPrefix + uid: "{}", rootAnnotation: `["app","migrate"]`}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s")},
				InitContainers: []corev1.Container{{Name: "migrate",
					Env: []corev1.EnvVar{rootEnv("/bindings")}, VolumeMounts: []corev1.VolumeMount{mount("/bindings/db")}}},
				Containers: []corev1.Container{
					{Name: "app", Env: []corev1.EnvVar{rootEnv("/bindings")}, VolumeMounts: []corev1.VolumeMount{mount("/bindings/db")}},
					{Name: "sidecar"}},
			},
		},
	}, {
		// A variable the user set is never replaced, and the warning says so.
		name:    "user env kept",
		in:      template(corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "DB_HOST", Value: "mine"}}}),
		binding: Binding{UID: uid, Name: "db", Secret: "s", Env: []sbv1.EnvMapping{{Name: "DB_HOST", Key: "host"}}},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{recordPrefix + uid: "{}", rootAnnotation: `["app"]`}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s")},
				Containers: []corev1.Container{{Name: "app",
					Env:          []corev1.EnvVar{{Name: "DB_HOST", Value: "mine"}, rootEnv("/bindings")},
					VolumeMounts: []corev1.VolumeMount{mount("/bindings/db")}}},
			},
		},
		warnings: []Warning{{Message: `container "app" already sets DB_HOST; left as it is`}},
	}, {
		// A volume of the user's own mounted at the binding's directory:
		// a second mount at the same path would have the whole workload
		// refused by the API server. That container is left without the
		// binding, the others are bound, and the warning says why.
		name: "user mount at the binding's path",
		in: template(
			corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: "/bindings/db"}}},
			corev1.Container{Name: "worker"}),
		binding: Binding{UID: uid, Name: "db", Secret: "s"},
		want: &corev1.PodTemplateSpec{
			ObjectMeta: objectMeta(map[string]string{recordPrefix + uid: "{}", rootAnnotation: `["worker"]`}),
			Spec: corev1.PodSpec{
				Volumes: []corev1.Volume{secretVolume("s")},
				Containers: []corev1.Container{
					{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: "/bindings/db"}}},
					{Name: "worker", Env: []corev1.EnvVar{rootEnv("/bindings")}, VolumeMounts: []corev1.VolumeMount{mount("/bindings/db")}}},
			},
		},
		warnings: []Warning{{Unbound: true, Message: `container "app" already mounts volume "own" at /bindings/db; the binding is not mounted there`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			orig := tt.in.DeepCopy()
			got := tt.in.DeepCopy()
			warnings := Project(got, tt.binding)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Project (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			// Reinvocation: projecting again changes nothing.
			again := got.DeepCopy()
			Project(again, tt.binding)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("second Project changed the template (-first +second):\n%s", diff)
			}
			if uids := Projected(got); len(uids) != 1 || uids[0] != uid {
				t.Errorf("Projected = %v, want [%s]", uids, uid)
			}
			// Unbinding removes exactly what was projected.
			Unproject(got, uid)
			if diff := cmp.Diff(orig, got); diff != "" {
				t.Errorf("Unproject left (-before projection +after unprojection):\n%s", diff)
			}
		})
	}
}

func objectMeta(ann map[string]string) metav1.ObjectMeta { return metav1.ObjectMeta{Annotations: ann} }

// TestProjectChanges: a binding that changes (rotation: a new Secret; fewer
// variables; fewer containers) is updated where it is, and a second binding
// keeps its place and SERVICE_BINDING_ROOT.
func TestProjectChanges(t *testing.T) {
	t.Parallel()
	const other = "11111111-2222-3333-4444-555555555555"
	tpl := template(corev1.Container{Name: "app"}, corev1.Container{Name: "sidecar"})
	tpl.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	orig := tpl.DeepCopy()

	first := Binding{UID: uid, Name: "db", Secret: "s1", Env: []sbv1.EnvMapping{{Name: "A", Key: "a"}, {Name: "B", Key: "b"}}}
	second := Binding{UID: other, Name: "cache", Secret: "c", Containers: []string{"app"}}
	Project(tpl, first)
	Project(tpl, second)

	rotated := first
	rotated.Secret = "s2"
	rotated.Env = []sbv1.EnvMapping{{Name: "B", Key: "b"}}
	rotated.Containers = []string{"app"}
	Project(tpl, rotated)

	if got := volumeNames(tpl); !cmp.Equal(got, []string{"data", VolumeName(uid), VolumeName(other)}) {
		t.Errorf("volumes = %v: order not kept", got)
	}
	if s := tpl.Spec.Volumes[1].Projected.Sources[0].Secret.Name; s != "s2" {
		t.Errorf("projected Secret = %q, want s2 after rotation", s)
	}
	app, sidecar := tpl.Spec.Containers[0], tpl.Spec.Containers[1]
	if diff := cmp.Diff([]corev1.EnvVar{rootEnv("/bindings"), secretEnv("B", "s2", "b")}, app.Env); diff != "" {
		t.Errorf("app env (-want +got):\n%s", diff)
	}
	if len(sidecar.Env) != 0 || len(sidecar.VolumeMounts) != 0 {
		t.Errorf("sidecar keeps %v %v after the binding left it", sidecar.Env, sidecar.VolumeMounts)
	}

	Unproject(tpl, uid)
	if _, ok := rootOf(&tpl.Spec.Containers[0]); !ok {
		t.Errorf("SERVICE_BINDING_ROOT removed while binding %s is still mounted", other)
	}
	Unproject(tpl, other)
	if diff := cmp.Diff(orig, tpl); diff != "" {
		t.Errorf("after unbinding both (-before +after):\n%s", diff)
	}
}

func volumeNames(tpl *corev1.PodTemplateSpec) []string {
	var names []string
	for _, v := range tpl.Spec.Volumes {
		names = append(names, v.Name)
	}
	return names
}

// TestUnprojectLeavesUserValues: a record written by hand (or a user's own
// variable of a name the binding also maps) is never taken away.
func TestUnprojectLeavesUserValues(t *testing.T) {
	t.Parallel()
	tpl := template(corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", Value: "1"}, rootEnv("/b")}})
	tpl.Annotations = map[string]string{recordPrefix + uid: "not json"}
	want := tpl.DeepCopy()
	delete(want.Annotations, recordPrefix+uid)
	want.Annotations = nil
	Unproject(tpl, uid)
	if diff := cmp.Diff(want, tpl); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMappings reads and writes workloads through the mappings: the
// default, the built-in Pod and CronJob ones, and the specification's
// ClusterWorkloadResourceMapping example.
func TestMappings(t *testing.T) {
	t.Parallel()
	cronJobCWRM := `
apiVersion: servicebinding.io/v1
kind: ClusterWorkloadResourceMapping
metadata:
  name: cronjobs.batch
spec:
  versions:
  - version: "*"
    annotations: .spec.jobTemplate.spec.template.metadata.annotations
    containers:
    - path: .spec.jobTemplate.spec.template.spec.containers[*]
      name: .name
      env: .env
      volumeMounts: .volumeMounts
    - path: .spec.jobTemplate.spec.template.spec.initContainers[*]
      name: .name
    volumes: .spec.jobTemplate.spec.template.spec.volumes
`
	var cwrm sbv1.ClusterWorkloadResourceMapping
	if err := yaml.Unmarshal([]byte(cronJobCWRM), &cwrm); err != nil {
		t.Fatal(err)
	}
	cronJob := `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "@daily"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {a: b}}
        spec:
          restartPolicy: Never
          containers:
          - {name: job, image: busybox, args: [true]}
`
	tests := []struct {
		name  string
		gk    schema.GroupKind
		cwrm  *sbv1.ClusterWorkloadResourceMapping
		obj   string
		mount []string // path to the first container's volumeMounts
	}{
		{"deployment default", schema.GroupKind{Group: "apps", Kind: "Deployment"}, nil,
			"spec: {template: {spec: {containers: [{name: app, image: x}]}}}",
			[]string{"spec", "template", "spec", "containers"}},
		{"pod built in", schema.GroupKind{Kind: "Pod"}, nil,
			"metadata: {name: p}\nspec: {containers: [{name: app, image: x}]}",
			[]string{"spec", "containers"}},
		{"cronjob built in", schema.GroupKind{Group: "batch", Kind: "CronJob"}, nil, cronJob,
			[]string{"spec", "jobTemplate", "spec", "template", "spec", "containers"}},
		{"cronjob by mapping", schema.GroupKind{Group: "batch", Kind: "CronJob"}, &cwrm, cronJob,
			[]string{"spec", "jobTemplate", "spec", "template", "spec", "containers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(tt.obj), &u.Object); err != nil {
				t.Fatal(err)
			}
			orig := u.DeepCopy()
			m, err := MappingFor(tt.gk, "v1", tt.cwrm)
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Template(u.Object, m)
			if err != nil {
				t.Fatal(err)
			}
			Project(tpl, Binding{UID: uid, Name: "db", Secret: "s"})
			if err := WriteTemplate(u.Object, m, tpl); err != nil {
				t.Fatal(err)
			}
			ctrs, _, _ := unstructured.NestedSlice(u.Object, tt.mount...)
			c := ctrs[0].(map[string]any)
			mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
			if len(mounts) != 1 || mounts[0].(map[string]any)["mountPath"] != "/bindings/db" {
				t.Errorf("volumeMounts = %v", mounts)
			}
			if c["image"] != "x" && c["image"] != "busybox" {
				t.Errorf("container fields outside the mapping lost: %v", c)
			}
			back, err := Template(u.Object, m)
			if err != nil {
				t.Fatal(err)
			}
			Unproject(back, uid)
			if err := WriteTemplate(u.Object, m, back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(orig.Object, u.Object); diff != "" {
				t.Errorf("round trip (-before +after):\n%s", diff)
			}
		})
	}
}

func TestParseMappingRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tpl  sbv1.ClusterWorkloadResourceMappingTemplate
		want string
	}{
		{sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*", Volumes: ".spec.volumes[*]"}, "volumes"},
		{sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*", Annotations: ".metadata.*"}, "annotations"},
		{sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*", Containers: []sbv1.ClusterWorkloadResourceMappingContainer{{Path: ".spec.containers[0]"}}}, "containers[0].path"},
		{sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*", Containers: []sbv1.ClusterWorkloadResourceMappingContainer{{Path: ".spec.containers[*]", Env: "..env"}}}, "containers[0].env"},
	} {
		_, err := ParseMapping(tt.tpl)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ParseMapping(%+v) = %v, want an error about %s", tt.tpl, err, tt.want)
		}
	}
}

// TestWorkloadMappingRecorded: a binding is projected into a workload with
// its mapping recorded in the workload's annotations, projected again
// with a changed mapping after removal with the recorded one, and removed
// with the recorded mapping whatever the mapping is then. Reading the
// workload with only the mapping of the moment used to leave the mounts
// in arrays a new mapping does not cover.
func TestWorkloadMappingRecorded(t *testing.T) {
	t.Parallel()
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(`
metadata: {name: web, annotations: {team: shop}}
spec: {template: {spec: {initContainers: [{name: init, image: x}], containers: [{name: app, image: x}]}}}
`), &obj); err != nil {
		t.Fatal(err)
	}
	orig := runtime.DeepCopyJSON(obj)
	initOnly, err := ParseMapping(sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*",
		Containers: []sbv1.ClusterWorkloadResourceMappingContainer{{Path: ".spec.template.spec.initContainers[*]", Name: ".name"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := Binding{UID: uid, Name: "db", Secret: "s"}
	bound := func() []string {
		tpl, err := Template(obj, podSpecable)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range tpl.Spec.Containers {
			if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VolumeName(uid) }) {
				names = append(names, c.Name)
			}
		}
		return names
	}
	for _, step := range []struct {
		m     Mapping
		bound []string
	}{
		{podSpecable, []string{"init", "app"}},
		{initOnly, []string{"init"}},
		{initOnly, []string{"init"}}, // again: nothing changes
	} {
		before := runtime.DeepCopyJSON(obj)
		changed, _, err := projectWorkload(obj, deployment, step.m, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := bound(); !slices.Equal(got, step.bound) {
			t.Errorf("bound %v, want %v", got, step.bound)
		}
		if m, ok := recordedMapping(obj, uid); !ok || !sameMapping(m, step.m) {
			t.Errorf("recorded mapping %+v (%v), want %+v", m, ok, step.m)
		}
		if changed == cmp.Equal(before, obj) {
			t.Errorf("changed = %v, but the object changed: %v", changed, !cmp.Equal(before, obj))
		}
	}
	// Removed with the recorded mapping, not with the one given.
	if _, err := unprojectWorkload(obj, podSpecable, uid); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, obj); diff != "" {
		t.Errorf("after unprojection (-before projection +after):\n%s", diff)
	}

	// A Pod's template never changes after creation, so it is never
	// unprojected: no record.
	pod := map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"containers": []any{map[string]any{"name": "app"}}}}
	podMapping, _ := MappingFor(schema.GroupKind{Kind: "Pod"}, "v1", nil)
	if _, _, err := projectWorkload(pod, schema.GroupKind{Kind: "Pod"}, podMapping, b); err != nil {
		t.Fatal(err)
	}
	if _, ok := recordedMapping(pod, uid); ok {
		t.Errorf("a Pod records its mapping: %v", pod["metadata"])
	}
}

// TestUnnamedContainerBound: a container of a MappingContainer without a
// name expression is bound even when the binding names containers
// (specification, Workload Resource Mapping: "If either key is not
// defined, the container SHOULD be bound"); the named ones are bound only
// when named. It used to be left out, its empty name matching none of
// spec.workload.containers.
func TestUnnamedContainerBound(t *testing.T) {
	t.Parallel()
	m, err := ParseMapping(sbv1.ClusterWorkloadResourceMappingTemplate{Version: "*",
		Containers: []sbv1.ClusterWorkloadResourceMappingContainer{
			{Path: ".spec.template.spec.containers[*]", Name: ".name"},
			{Path: ".spec.sidecars[*]"}, // no name expression
		}})
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(`
spec:
  sidecars: [{image: proxy}]
  template: {spec: {containers: [{name: app, image: x}, {name: other, image: x}]}}
`), &obj); err != nil {
		t.Fatal(err)
	}
	tpl, err := Template(obj, m)
	if err != nil {
		t.Fatal(err)
	}
	orig := tpl.DeepCopy()
	Project(tpl, Binding{UID: uid, Name: "db", Secret: "s", Containers: []string{"app"}})
	for i, want := range []bool{true, false, true} { // app, other, the unnamed sidecar
		c := tpl.Spec.Containers[i]
		if got := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VolumeName(uid) }); got != want {
			t.Errorf("container %d (%q) bound: %v, want %v", i, c.Name, got, want)
		}
	}
	Unproject(tpl, uid)
	if diff := cmp.Diff(orig, tpl); diff != "" {
		t.Errorf("Unproject left (-before projection +after unprojection):\n%s", diff)
	}
}

package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindery-dev/bindery/internal/kubetest"
)

// chart is the Helm chart, relative to deploy/.
const chart = "helm/bindery"

// helmLabels are the labels the chart adds to every object by Helm's
// conventions (templates/_helpers.tpl), which the kustomize manifests do not
// carry; annotations under helm.sh/ are Helm's instructions to itself.
// helmNames are the Helm binaries the chart is checked with: v4 and v3.
var helmNames = []string{"helm", "helm3"}

var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

// helms returns the Helm binaries the chart is checked with, by name
// (helmNames).
func helms(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range helmNames {
		out[name] = helmBin(t, name)
	}
	return out
}

// helmBin returns the path of a Helm binary built by tools/helm/build.sh
// (make helm).
func helmBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(kubetest.EnvBin)
	if dir == "" {
		dir = filepath.Join("..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing from %s: run tools/helm/build.sh (make helm) to build it", name, dir)
	}
	return p
}

// variant is one values file of the chart and the kustomize directories
// whose objects, together, it must render.
type variant struct {
	values string   // path relative to deploy/
	dirs   []string // relative to deploy/
}

// variants reads the chart's values.yaml (deploy/ itself) and each
// ci/*-values.yaml, whose first line names its directories:
// "# kustomize: DIR ...".
func variants(t *testing.T) []variant {
	t.Helper()
	vs := []variant{{values: filepath.Join(chart, "values.yaml"), dirs: []string{"."}}}
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(data), "\n")
		dirs, ok := strings.CutPrefix(first, "# kustomize: ")
		if !ok {
			t.Fatalf("%s: the first line must name the kustomize directories it matches: # kustomize: DIR ...", f)
		}
		var rel []string
		for _, d := range strings.Fields(dirs) {
			rel = append(rel, strings.TrimPrefix(strings.TrimPrefix(d, "deploy/"), "deploy"))
		}
		for i, d := range rel {
			if d == "" {
				rel[i] = "."
			}
		}
		vs = append(vs, variant{values: f, dirs: rel})
	}
	return vs
}

// helmTemplate renders the chart with a values file and extra flags.
func helmTemplate(t *testing.T, helm, values string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", "bindery", chart, "-f", values}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s template -f %s: %v\n%s", filepath.Base(helm), values, err, stderr.String())
	}
	return out
}

// withoutHelm returns o as a map, without the chart's Helm labels and
// helm.sh/ annotations, and without labels or annotations left empty.
func withoutHelm(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	o = o.DeepCopy()
	labels := o.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(o.Object, "metadata", "labels")
	} else {
		o.SetLabels(labels)
	}
	ann := o.GetAnnotations()
	for k := range ann {
		if strings.HasPrefix(k, "helm.sh/") {
			delete(ann, k)
		}
	}
	if len(ann) == 0 {
		unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
	} else {
		o.SetAnnotations(ann)
	}
	// Through JSON, so that numbers compare alike whichever YAML they
	// came from.
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHelmMatchesKustomize renders the chart for each variant with Helm v4
// and v3 and compares every object with `kustomize build` of the
// directories the variant names: the same objects, field for field, once
// Helm's own labels and annotations are dropped. Every kustomization under
// deploy/ is matched by some variant, so that a manifest added there must
// be added to the chart too. It also runs `helm lint --strict` on each.
func TestHelmMatchesKustomize(t *testing.T) {
	t.Parallel()
	hs := helms(t)
	kubectlBin := filepath.Join(filepath.Dir(hs["helm"]), "kubectl")
	vs := variants(t)

	covered := map[string]bool{}
	for _, v := range vs {
		for _, d := range v.dirs {
			covered[d] = true
		}
	}
	for _, d := range kustomizations(t) {
		// bindery/base is what bindery builds; servicebinding/cert-manager
		// is one Certificate, which needs bindery/cert-manager's Issuer
		// and is matched with it in deploy/cert-manager.
		if !covered[d] && d != filepath.Join("bindery", "base") && d != filepath.Join("servicebinding", "cert-manager") {
			t.Errorf("no variant in %s/ci matches deploy/%s: add a values file whose first line is \"# kustomize: deploy/%s\"", chart, d, d)
		}
	}

	built := map[string]map[string]map[string]any{}
	for _, v := range vs {
		want := map[string]map[string]any{}
		for _, d := range v.dirs {
			if built[d] == nil {
				out, err := exec.CommandContext(t.Context(), kubectlBin, "kustomize", d).Output()
				if err != nil {
					t.Fatalf("kubectl kustomize %s: %v", d, err)
				}
				built[d] = map[string]map[string]any{}
				for _, o := range objects(t, d, out) {
					built[d][objectKey(o)] = withoutHelm(t, o)
				}
			}
			for k, o := range built[d] {
				want[k] = o
			}
		}
		for _, name := range helmNames {
			t.Run(name+"/"+filepath.Base(v.values), func(t *testing.T) {
				got := map[string]map[string]any{}
				for _, o := range objects(t, v.values, helmTemplate(t, hs[name], v.values)) {
					got[objectKey(o)] = withoutHelm(t, o)
				}
				compareObjects(t, v, got, want)
				lint := exec.CommandContext(t.Context(), hs[name], "lint", "--strict", chart, "-f", v.values)
				if out, err := lint.CombinedOutput(); err != nil {
					t.Errorf("%s lint --strict -f %s: %v\n%s", name, v.values, err, out)
				}
			})
		}
	}
}

// compareObjects reports every object one side has and the other lacks,
// and every field that differs, with both sides as JSON.
func compareObjects(t *testing.T, v variant, got, want map[string]map[string]any) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, inChart := got[k]
		w, inKustomize := want[k]
		switch {
		case !inChart:
			t.Errorf("%s: kustomize build %v has it, the chart does not", k, v.dirs)
		case !inKustomize:
			t.Errorf("%s: the chart has it, kustomize build %v does not", k, v.dirs)
		case !reflect.DeepEqual(g, w):
			gj, _ := json.MarshalIndent(g, "", "  ")
			wj, _ := json.MarshalIndent(w, "", "  ")
			t.Errorf("%s differs:\n%s", k, lineDiff(string(wj), string(gj)))
		}
	}
}

// lineDiff shows the lines of a (kustomize) and b (the chart) that the
// other lacks, in order: enough to find a field that drifted.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i, j := 0, 0; i < len(al) || j < len(bl); {
		switch {
		case i < len(al) && j < len(bl) && al[i] == bl[j]:
			i, j = i+1, j+1
		case j < len(bl) && !slices.Contains(al[i:], bl[j]):
			out = append(out, fmt.Sprintf("+ chart     %s", bl[j]))
			j++
		case i < len(al):
			out = append(out, fmt.Sprintf("- kustomize %s", al[i]))
			i++
		default:
			out = append(out, fmt.Sprintf("+ chart     %s", bl[j]))
			j++
		}
	}
	return strings.Join(out, "\n")
}

// renderChart renders the chart's defaults with extra flags and returns
// its objects by objectKey.
func renderChart(t *testing.T, helm string, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	values := filepath.Join(chart, "values.yaml")
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objects(t, values, helmTemplate(t, helm, values, args...)) {
		out[objectKey(o)] = o
	}
	return out
}

// TestHelmKeepsTheNamespace: the namespace bindery-system, where the
// operator keeps the database and encryption Secrets (docs/install.md),
// carries helm.sh/resource-policy: keep. As a release object without it,
// `helm uninstall` deleted the namespace and, with it, the only copy of
// the keys in the cluster, which left every sealed credential unreadable.
func TestHelmKeepsTheNamespace(t *testing.T) {
	t.Parallel()
	for name, helm := range helms(t) {
		ns := renderChart(t, helm)["Namespace /bindery-system"]
		if ns == nil {
			t.Fatalf("%s: the chart renders no namespace bindery-system", name)
		}
		if got := ns.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
			t.Errorf("%s: namespace bindery-system has helm.sh/resource-policy %q, want keep", name, got)
		}
	}
}

// TestHelmUninstallKeepsTheSecrets installs the chart on a real
// kube-apiserver as docs/install.md says (the namespace and the operator's
// Secrets first), uninstalls it, and finds the namespace and the
// encryption Secret still there, with Helm v4 and v3. No Pod needs to run
// for that, so there is no node.
func TestHelmUninstallKeepsTheSecrets(t *testing.T) {
	t.Parallel()
	hs := helms(t)
	c := kubetest.Start(t)
	ctx := t.Context()
	for _, name := range helmNames {
		kubectl(ctx, t, c, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: bindery-system
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: bindery, meta.helm.sh/release-namespace: bindery-system}
`), "apply", "-f", "-")
		kubectl(ctx, t, c, nil, "-n", "bindery-system", "create", "secret", "generic", "bindery-encryption", "--from-literal=keys=k")
		helmRun(t, hs[name], c, "install", "bindery", chart, "--namespace", "bindery-system", "--set", "nodeAgent.enabled=false")
		helmRun(t, hs[name], c, "uninstall", "bindery", "--namespace", "bindery-system")
		out, _ := kubectl(ctx, t, c, nil, "get", "namespace", "bindery-system", "-o", "jsonpath={.metadata.deletionTimestamp}")
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s uninstall: namespace bindery-system is being deleted (%s)", name, out)
		}
		// Ready for the next Helm: the kept namespace and Secret are the
		// operator's again.
		kubectl(ctx, t, c, nil, "-n", "bindery-system", "delete", "secret", "bindery-encryption")
	}
}

// helmRun runs Helm against the cluster as its admin and fails the test
// when Helm fails.
func helmRun(t *testing.T, helm string, c *kubetest.Cluster, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", c.Kubeconfig())...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(helm), strings.Join(args, " "), err, out)
	}
}

// TestHelmDisruptionBudgets renders the chart with one, two and three
// replicas of each Deployment and checks what its PodDisruptionBudget
// lets a drain do: with one replica, evict it (a budget that kept one
// running blocked `kubectl drain` for ever); with more, evict some and
// keep at least one running.
func TestHelmDisruptionBudgets(t *testing.T) {
	t.Parallel()
	deployments := map[string]string{"apiserver": "bindery-apiserver", "controller": "bindery-controller", "webhook": "bindery-webhook"}
	hs := helms(t)
	for _, replicas := range []int{1, 2, 3} {
		var args []string
		for value := range deployments {
			args = append(args, "--set", fmt.Sprintf("%s.replicas=%d", value, replicas))
		}
		for name, helm := range hs {
			objs := renderChart(t, helm, args...)
			for _, d := range deployments {
				allowed, ok := disruptionsAllowed(t, objs["PodDisruptionBudget bindery-system/"+d], replicas)
				switch {
				case replicas == 1 && ok && allowed < 1:
					t.Errorf("%s, %s with 1 replica: its budget allows %d evictions, so a drain never ends", name, d, allowed)
				case replicas > 1 && (!ok || allowed < 1 || allowed > replicas-1):
					t.Errorf("%s, %s with %d replicas: its budget (present: %v) allows %d evictions, want 1 to %d", name, d, replicas, ok, allowed, replicas-1)
				}
			}
		}
	}
}

// disruptionsAllowed is how many of replicas healthy Pods pdb lets be
// evicted at once; false when there is no budget.
func disruptionsAllowed(t *testing.T, pdb *unstructured.Unstructured, replicas int) (int, bool) {
	t.Helper()
	if pdb == nil {
		return replicas, false
	}
	if n, ok, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); ok {
		return int(toInt(t, n)), true
	}
	if n, ok, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); ok {
		return max(replicas-int(toInt(t, n)), 0), true
	}
	t.Fatalf("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable", pdb.GetName())
	return 0, false
}

// toInt reads a number the YAML decoder gave as int64 or float64; a
// percentage fails the test, since the chart sets none.
func toInt(t *testing.T, v any) int64 {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	t.Fatalf("a PodDisruptionBudget count of %v (%T): want a number", v, v)
	return 0
}

// TestHelmImageTag: a tag Helm's --set reads as a number (a build
// number, 12) names the image as a string tag does; before, hasPrefix
// refused it ("wrong type for value; expected string; got int64") and
// nothing rendered. A digest is joined with @.
func TestHelmImageTag(t *testing.T) {
	t.Parallel()
	const repo = "ghcr.io/bindery-dev/bindery"
	for name, helm := range helms(t) {
		for tag, want := range map[string]string{"12": repo + ":12", "v1.2.3": repo + ":v1.2.3", "@sha256:0123": repo + "@sha256:0123"} {
			objs := renderChart(t, helm, "--set", "image.tag="+tag)
			d := objs["Deployment bindery-system/bindery-controller"]
			if d == nil {
				t.Fatalf("%s, tag %s: no Deployment bindery-controller", name, tag)
			}
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				t.Fatalf("%s, tag %s: bindery-controller has no containers", name, tag)
			}
			if got := containers[0].(map[string]any)["image"]; got != want {
				t.Errorf("%s, --set image.tag=%s: image %v, want %s", name, tag, got, want)
			}
		}
	}
}

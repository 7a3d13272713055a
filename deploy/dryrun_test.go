package deploy

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/bindery-dev/bindery/internal/kubetest"
)

// kustomizations lists every directory under deploy/ with a
// kustomization.yaml, testdata and the Helm chart aside.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The chart's files are templates, checked against these by
		// TestHelmMatchesKustomize.
		if d.IsDir() && (d.Name() == "testdata" || p == "helm") {
			return filepath.SkipDir
		}
		if d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// objects decodes a multi-document YAML stream.
func objects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			if err.Error() == "EOF" {
				return objs
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(o) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: o})
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// kubectl runs kubectl as the cluster's admin and returns its standard
// output and standard error (where kubectl prints the API's warnings).
func kubectl(ctx context.Context, t *testing.T, c *kubetest.Cluster, stdin []byte, args ...string) (string, string) {
	t.Helper()
	// Every call is bounded: a request the aggregation layer never answers
	// fails the test rather than hanging it.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := c.KubectlCommand(ctx, kubetest.Admin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// podSecurityWarning is how kube-apiserver's PodSecurity admission says
// that a Pod template would not pass a namespace's level.
var podSecurityWarning = regexp.MustCompile(`would violate PodSecurity "([a-z]+):[^"]*": (.*)`)

// TestServerDryRun applies every kustomization under deploy/ with
// `kubectl apply --dry-run=server` to a real kube-apiserver: each object is
// validated, defaulted and admitted as in a cluster (strict field
// validation, PodSecurity), and nothing is stored. The namespaces are
// created for real first, since a dry-run namespace does not exist for the
// objects after it, and so are stand-ins for the CRDs of the add-ons the
// manifests use (testdata/crds: cert-manager, the Prometheus Operator).
// Any warning fails the test: a Pod template that would not pass its
// namespace's Pod Security level, a deprecated API or field. Every YAML
// file under deploy/ must be part of some kustomization. The Helm chart's
// variants (TestHelmMatchesKustomize) are applied the same way.
func TestServerDryRun(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ctx := t.Context()
	kubectl(ctx, t, c, nil, "apply", "-f", "testdata/crds")
	kubectl(ctx, t, c, nil, "wait", "--for=condition=Established", "--timeout=60s", "-f", "testdata/crds")

	dirs := kustomizations(t)
	built := map[string][]*unstructured.Unstructured{}
	for _, dir := range dirs {
		out, _ := kubectl(ctx, t, c, nil, "kustomize", dir)
		built[dir] = objects(t, dir, []byte(out))
	}
	var namespaces bytes.Buffer
	seen := map[string]bool{}
	for _, dir := range dirs {
		for _, o := range built[dir] {
			if o.GetKind() == "Namespace" && !seen[o.GetName()] {
				seen[o.GetName()] = true
				b, err := o.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				namespaces.Write(b)
				namespaces.WriteByte('\n')
			}
		}
	}
	kubectl(ctx, t, c, namespaces.Bytes(), "apply", "-f", "-")

	for _, dir := range dirs {
		t.Run(filepath.Join("deploy", dir), func(t *testing.T) {
			out, warnings := kubectl(ctx, t, c, nil, "apply", "--dry-run=server", "-k", dir)
			if n := strings.Count(out, "(server dry run)"); n != len(built[dir]) {
				t.Errorf("%d objects applied, %d built:\n%s", n, len(built[dir]), out)
			}
			if strings.TrimSpace(warnings) != "" {
				t.Errorf("warnings:\n%s", warnings)
			}
		})
	}

	// The Helm chart, for each of its variants, as `helm template |
	// kubectl apply --dry-run=server -f -`.
	hs := helms(t)
	for _, v := range variants(t) {
		for _, name := range helmNames {
			t.Run(filepath.Join(name, filepath.Base(v.values)), func(t *testing.T) {
				rendered := helmTemplate(t, hs[name], v.values)
				out, warnings := kubectl(ctx, t, c, rendered, "apply", "--dry-run=server", "-f", "-")
				if n, want := strings.Count(out, "(server dry run)"), len(objects(t, v.values, rendered)); n != want {
					t.Errorf("%d objects applied, %d rendered:\n%s", n, want, out)
				}
				if strings.TrimSpace(warnings) != "" {
					t.Errorf("warnings:\n%s", warnings)
				}
			})
		}
	}

	// Every file is applied by some kustomization: its objects are among
	// those built (the node agent's config.yaml is a ConfigMap's data).
	all := map[string]bool{}
	for _, objs := range built {
		for _, o := range objs {
			all[objectKey(o)] = true
		}
	}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The chart's files are templates, checked against these by
		// TestHelmMatchesKustomize.
		if d.IsDir() && (d.Name() == "testdata" || p == "helm") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".yaml") || d.Name() == "kustomization.yaml" || p == filepath.Join("nodeagent", "config.yaml") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, o := range objects(t, p, data) {
			if !all[objectKey(o)] {
				t.Errorf("%s: %s is in no kustomization", p, objectKey(o))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPodSecurityLevels checks the Pod Security levels the namespaces
// enforce, against kube-apiserver's PodSecurity admission: every Pod
// template in bindery-system passes `restricted` (TestServerDryRun fails
// on a warning), a template that does not is refused there, and the node
// agent, in its `privileged` namespace, breaks `restricted` exactly where
// deploy/nodeagent/README.md says.
func TestPodSecurityLevels(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ctx := t.Context()
	out, _ := kubectl(ctx, t, c, nil, "kustomize", ".")
	objs := objects(t, "deploy", []byte(out))
	var namespaces, nodeagent []byte
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && o.GetName() == "bindery-nodeagent" {
			o.SetNamespace("restricted-probe")
		}
		b, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		switch o.GetKind() {
		case "Namespace":
			namespaces = append(append(namespaces, b...), '\n')
		case "DaemonSet":
			nodeagent = b
		}
	}
	kubectl(ctx, t, c, namespaces, "apply", "-f", "-")
	labels, _ := kubectl(ctx, t, c, nil, "get", "namespaces", "bindery-system", "bindery-node",
		"-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.pod-security\.kubernetes\.io/enforce} {end}`)
	if got, want := strings.TrimSpace(labels), "bindery-system=restricted bindery-node=privileged"; got != want {
		t.Errorf("enforced levels: %s, want %s", got, want)
	}

	// A Pod in bindery-system without a seccomp profile is refused.
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"loose","namespace":"bindery-system"},
		"spec":{"containers":[{"name":"c","image":"example.invalid/c","securityContext":{"runAsNonRoot":true,
		"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}`)
	cmd := c.KubectlCommand(ctx, kubetest.Admin, "apply", "--dry-run=server", "-f", "-")
	cmd.Stdin = bytes.NewReader(pod)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `violates PodSecurity "restricted`) {
		t.Errorf("a Pod without seccompProfile in bindery-system: %v\n%s", err, out)
	}

	// The node agent's template in a namespace that warns at restricted.
	kubectl(ctx, t, c, nil, "create", "namespace", "restricted-probe")
	kubectl(ctx, t, c, nil, "label", "namespace", "restricted-probe", "pod-security.kubernetes.io/warn=restricted")
	_, warnings := kubectl(ctx, t, c, nodeagent, "apply", "--dry-run=server", "-f", "-")
	m := podSecurityWarning.FindStringSubmatch(warnings)
	if m == nil || m[1] != "restricted" {
		t.Fatalf("no restricted warning for the node agent:\n%s", warnings)
	}
	got := splitViolations(m[2])
	want := []string{
		`restricted volume types (volumes "device-plugins", "dev", "cni-bin", "cni-conf" use restricted volume type "hostPath")`,
		`runAsNonRoot != true (pod or containers "install-cni", "nodeagent" must set securityContext.runAsNonRoot=true)`,
		`runAsUser=0 (containers "install-cni", "nodeagent" must not set runAsUser=0)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the node agent breaks restricted with:\n  %s\nwant (deploy/nodeagent/README.md):\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// splitViolations splits PodSecurity's list "a (x, y), b (z)" at the
// commas outside parentheses.
func splitViolations(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/registry/rest/resttest"
)

// resttestExcluded are the checks of k8s.io/apiserver's resttest that the
// catalog cannot meet, and why. Every other check of TestCreate and
// TestDelete must pass.
var resttestExcluded = map[string]string{
	// A dry run answers the object as a create makes it, but the create
	// that follows gets a new spec.externalID from the catalog, so an
	// instance's or a binding's two objects cannot be equal.
	"testCreateDryRunEquals": "a create gets a spec.externalID of its own, which no dry run before it can know",
	// The object is created with uid "UID0000" (written straight into
	// etcd in Kubernetes' own use); here the uid is the catalog's id, a
	// UUID the catalog assigns.
	"testDeleteWithUID": `the uid is the catalog's id, a UUID, never "UID0000"`,
}

// resttestChildEnv marks the process that runs a resttest suite for
// resttestAllBut.
const resttestChildEnv = "BINDERY_RESTTEST_CHILD"

// resttestAllBut runs suite, one of resttest's TestCreate or TestDelete,
// and fails t for any failure but those of the excluded checks (names in
// resttestExcluded), which must fail. resttest's checks
// are not exported one by one and report through the *testing.T they are
// given, so the suite runs in a child process of this test binary and
// each failure it reports is traced to the resttest function that
// reported it. An excluded check that starts passing fails t too, so that
// the exclusion and the README saying so go together.
func resttestAllBut(t *testing.T, excluded string, suite func(t *testing.T)) {
	t.Helper()
	if _, ok := resttestExcluded[excluded]; !ok {
		t.Fatalf("%s is not a resttest check excluded here", excluded)
	}
	if os.Getenv(resttestChildEnv) != "" {
		suite(t)
		return
	}
	var pattern []string
	for _, part := range strings.Split(t.Name(), "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", strings.Join(pattern, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), resttestChildEnv+"=1")
	out, runErr := cmd.CombinedOutput()
	if !bytes.Contains(out, []byte("=== RUN   "+t.Name())) {
		t.Fatalf("the suite did not run (%v):\n%s", runErr, out)
	}
	funcs := resttestFuncs(t)
	failed := map[string]bool{}
	var unexpected []string
	report := regexp.MustCompile(`^\s+(\S+\.go):(\d+): (.*)$`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20) // resttest prints whole objects
	for sc.Scan() {
		m := report.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[2])
		fn := ""
		if m[1] == "resttest.go" {
			fn = funcs(line)
		}
		if fn == excluded {
			failed[fn] = true
			continue
		}
		unexpected = append(unexpected, fn+": "+sc.Text())
	}
	for _, u := range unexpected {
		t.Error(u)
	}
	if runErr != nil && len(failed) == 0 && len(unexpected) == 0 {
		t.Errorf("the suite failed with no check to blame (%v):\n%s", runErr, out)
	}
	if !failed[excluded] {
		t.Errorf("%s, excluded because %s, passed: run it, and update the README", excluded, resttestExcluded[excluded])
	}
}

// resttestFuncs reads resttest.go's source and returns a function giving
// the name of the function around a line.
func resttestFuncs(t *testing.T) func(line int) string {
	t.Helper()
	pc := reflect.ValueOf((*resttest.Tester).TestCreate).Pointer()
	file, _ := runtime.FuncForPC(pc).FileLine(pc)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("read resttest's source to name its failing checks: %v", err)
	}
	type span struct {
		name     string
		from, to int
	}
	var spans []span
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			spans = append(spans, span{fd.Name.Name, fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line})
		}
	}
	return func(line int) string {
		for _, s := range spans {
			if s.from <= line && line <= s.to {
				return s.name
			}
		}
		return ""
	}
}

// clearingLeftover is createFn for TestDelete. testDeleteWithUID, which is
// excluded, cannot delete the object it creates (its uid precondition
// names a uid the catalog never gives), and the checks after it create an
// object of the same name: the leftover is deleted first, so that they
// check what they are meant to instead of tripping over it.
func clearingLeftover(s rest.GracefulDeleter, createFn resttest.CreateFunc) resttest.CreateFunc {
	return func(ctx context.Context, obj k8sruntime.Object) error {
		om, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		if _, _, err := s.Delete(ctx, om.GetName(), nil, nil); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return createFn(ctx, obj)
	}
}

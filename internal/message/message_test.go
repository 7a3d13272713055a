package message

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ProvisionedSuccessfully": "Provisioned successfully", "CircuitBreakerOpen": "Circuit breaker open",
		"ErrorFetchingOSBCatalog": "Error fetching OSB catalog", "ready": "ready", "": "",
	} {
		if got := Words(in); got != want {
			t.Errorf("Words(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEveryEngineReasonHasWords reads the reason codes the engine and the
// catalog write (controller/reasons.go, catalog's Reason constants) and
// checks the catalogue words each of them, so a new code cannot reach
// people as CamelCase unnoticed.
func TestEveryEngineReasonHasWords(t *testing.T) {
	t.Parallel()
	var codes []string
	for _, file := range []string{"../../controller/reasons.go", "../../catalog/references.go", "../../catalog/relist.go", "../../catalog/status.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != 1 || !strings.HasPrefix(strings.ToLower(vs.Names[0].Name), "reason") {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				codes = append(codes, s)
			}
			return true
		})
	}
	if len(codes) < 40 {
		t.Fatalf("found only %d reason codes: %v", len(codes), codes)
	}
	for _, c := range codes {
		r, ok := reasons[c]
		if !ok {
			t.Errorf("reason %q has no words in the catalogue", c)
			continue
		}
		if !strings.HasSuffix(r.Sentence, ".") || !unicode.IsUpper([]rune(r.Sentence)[0]) || r.Word == "" {
			t.Errorf("reason %q: %+v is no sentence and word", c, r)
		}
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	plans := []string{"small", "standard", "large-async"}
	for in, want := range map[string]string{"smal": "small", "standrd": "standard", "tiny": "", "large": "large-async", "small": "small", "x": ""} {
		if got := Closest(in, plans); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnreachable words real network failures.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = http.Get("http://" + addr + "/v2/catalog")
	if got := Unreachable("http://"+addr, err); !strings.Contains(got, "Nothing answers at "+addr) || strings.Contains(got, "dial") {
		t.Errorf("refused: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr, nil)
	_, err = http.DefaultClient.Do(req)
	if got := Unreachable("http://"+addr, err); !strings.Contains(got, "did not answer in time") {
		t.Errorf("timeout: %q", got)
	}
	_, err = net.LookupHost("no-such-host.invalid")
	if got := Unreachable("http://no-such-host.invalid", err); !strings.Contains(got, `"no-such-host.invalid" does not resolve`) {
		t.Errorf("dns: %q", got)
	}
}

func TestField(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"spec.secretName": "the Secret name", "spec.relistBehavior": "the relist behavior", "spec.parameters.size": `parameter "size"`,
		"namespaces[2]": "entry 2 of the namespaces", "catalogRestrictions.serviceClass[0]": "entry 0 of the service class restrictions",
		"spec.secretTransforms[1].addKey.key": "the key",
	} {
		if got := Field(in); got != want {
			t.Errorf("Field(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Required("spec.secretName"); got != "The Secret name is required." {
		t.Errorf("Required: %q", got)
	}
}

// TestQuotaSentences: the sentences of a quota's refusal, which every
// door shows.
func TestQuotaSentences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{QuotaExceeded("team-a", 10, "instance", "", 10), "namespace team-a may have 10 instances and has 10"},
		{QuotaExceeded("team-a", 1, "binding", "", 3) + QuotaFrom(true, ""), "namespace team-a may have 1 binding and has 3 (the default quota)"},
		{QuotaExceeded("team-a", 0, "instance", "plan large", 0) + QuotaFrom(true, "objects"), "namespace team-a may have 0 instances of plan large and has 0 (ResourceQuota objects)"},
		{PaidPlanRefused("team-a", "large") + QuotaFrom(false, ""), "namespace team-a may not use paid plans, and plan large is not free"},
		{ReasonOf("QuotaExceeded").Word, "Waiting for room"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

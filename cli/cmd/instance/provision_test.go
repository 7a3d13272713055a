package instance

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
)

// TestNewProvision: the flags land in the options; a bad --scope is
// refused when the command line is parsed.
func TestNewProvision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		want    ProvisionOptions
		wantErr string
	}{
		{args: []string{"db", "-c", "postgresql", "-p", "small"},
			want: ProvisionOptions{Name: "db", Class: "postgresql", Plan: "small", Wait: cmdutil.WaitFlags{Timeout: 10 * time.Minute}}},
		{args: []string{"db", "--class", "pg", "--plan", "p", "--scope", "namespace", "--param", "a=1", "--param", "b=x", "--params-json", "{}", "-w", "--timeout", "1m", "--allow-missing"},
			want: ProvisionOptions{Name: "db", Class: "pg", Plan: "p", Scope: "namespace", Params: cmdutil.ParamFlags{Pairs: []string{"a=1", "b=x"}, JSON: "{}"},
				Wait: cmdutil.WaitFlags{Wait: true, Timeout: time.Minute}, AllowMissing: true}},
		{args: []string{"db", "--scope", "galaxy"}, wantErr: `invalid argument "galaxy" for "--scope" flag: want one of cluster, namespace`},
		{args: []string{}, wantErr: "accepts 1 arg(s), received 0"},
	} {
		srv := clitest.New(t)
		f, _ := srv.Factory(false)
		var got *ProvisionOptions
		cmd := NewProvision(f, func(_ context.Context, o *ProvisionOptions) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		err := cmd.Execute()
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		got.F = nil
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.args, *got, tc.want)
		}
	}
}

const offer = `{"items":[{"name":"c1","spec":{"externalName":"postgresql"}}]}`
const plans = `{"items":[{"name":"p1","spec":{"externalName":"small"}},{"name":"p2","spec":{"externalName":"standard"}}]}`

// TestProvisionRun: the request sent and the output, exactly, for an
// instance of a class and plan on offer, and the refusal of a typo.
func TestProvisionRun(t *testing.T) {
	t.Parallel()
	srv := clitest.New(t).
		On("GET", "/serviceclasses?limit=1000&name=postgresql", 200, offer).
		On("GET", "/serviceclasses?limit=1000", 200, offer).
		On("GET", "/serviceplans?class=c1&limit=1000&visibleIn=team", 200, plans).
		On("GET", "/serviceplans?class=c1&limit=1000&visibleIn=default", 200, plans).
		On("POST", "/instances", 201, `{"id":"i1","name":"db","namespace":"team","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"},
			"status":{},"progress":{"state":"working","message":"It waits for the engine to provision it."}}`)
	f, st := srv.Factory(false)
	f.Namespace = "team"
	err := Provision(context.Background(), &ProvisionOptions{F: f, Name: "db", Class: "postgresql", Plan: "small", Params: cmdutil.ParamFlags{Pairs: []string{"size=10"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "NAMESPACE\tNAME\tCLASS\tPLAN\tSTATUS\nteam\tdb\tpostgresql\tsmall\tPending\n"; st.Out.String() != want {
		t.Errorf("stdout:\n%q\nwant\n%q", st.Out.String(), want)
	}
	if st.Err.String() != "" {
		t.Errorf("stderr: %q", st.Err.String())
	}
	if last := srv.Requests[len(srv.Requests)-1]; last != `POST /instances {"name":"db","namespace":"team","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","parameters":{"size":10}}}` {
		t.Errorf("request: %s", last)
	}

	f, _ = srv.Factory(false)
	err = Provision(context.Background(), &ProvisionOptions{F: f, Name: "db", Class: "postgresql", Plan: "smal"})
	want := "Service class \"postgresql\" has no plan named \"smal\". Did you mean \"small\"?\n" +
		"`bindery marketplace -c postgresql` lists its plans; --allow-missing records the instance to wait for it."
	if err == nil || err.Error() != want {
		t.Errorf("a typo: %v\nwant %s", err, want)
	}
}

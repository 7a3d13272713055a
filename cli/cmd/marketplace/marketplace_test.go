package marketplace

import (
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/clitest"
)

// TestRun: the classes with their plans, and one class's plans, exactly;
// on a terminal a long description is cut to its width.
func TestRun(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a very long description ", 10)
	srv := clitest.New(t).
		On("GET", "/serviceclasses", 200, `{"items":[{"name":"c1","spec":{"externalName":"postgresql","description":"PostgreSQL databases","clusterServiceBrokerName":"builtin"}},
			{"name":"c2","spec":{"externalName":"redis","description":"`+long+`","clusterServiceBrokerName":"cache"}}]}`).
		On("GET", "/serviceplans?class=postgresql&limit=1000", 200, `{"items":[{"name":"p1","spec":{"externalName":"small","free":true,"description":"1 GB"}}]}`).
		On("GET", "/serviceplans", 200, `{"items":[{"name":"p1","spec":{"externalName":"small","clusterServiceClassRef":{"name":"c1"}}},
			{"name":"p2","spec":{"externalName":"large","clusterServiceClassRef":{"name":"c1"}}}]}`)
	for _, tc := range []struct {
		args     []string
		terminal bool
		stdout   string
	}{
		{args: []string{"marketplace"}, stdout: "CLASS\tPLANS\tBROKER\tDESCRIPTION\npostgresql\tsmall, large\tbuiltin\tPostgreSQL databases\nredis\t-\tcache\t" + long + "\n"},
		{args: []string{"marketplace"}, terminal: true, stdout: "CLASS        PLANS          BROKER    DESCRIPTION\n" +
			"postgresql   small, large   builtin   PostgreSQL databases\n" +
			"redis        -              cache     a very long description a very long description a very long d…\n"},
		{args: []string{"marketplace", "-c", "postgresql"}, stdout: "PLAN\tFREE\tDESCRIPTION\nsmall\ttrue\t1 GB\n"},
	} {
		f, st := srv.Factory(tc.terminal)
		root := clitest.Root(f, NewCmd(f, nil))
		root.SetArgs(tc.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if st.Out.String() != tc.stdout {
			t.Errorf("%q:\n%s\nwant\n%s", tc.args, st.Out.String(), tc.stdout)
		}
	}
}

package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker"
)

// TestOperationResumesInNextProcess stops a broker while an asynchronous
// provision and bind are running; a new broker on the same database
// finishes both, and the platform sees them succeed.
func TestOperationResumesInNextProcess(t *testing.T) {
	t.Parallel()
	g := newGate(nil)
	first := setup(t, func(o *options) {
		o.wrap = func(d broker.Driver) broker.Driver { g.Driver = d; return g }
		o.timeout = 2 * time.Second
	})
	id := randomID("resume")
	path := "/v2/service_instances/" + id
	op := first.expect(first.do("PUT", path+"?accepts_incomplete=true", provisionBody(planSmall, nil)), 202).str("operation")
	<-g.entered
	// A stop that does not wait: the running provision is cancelled half way.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = first.broker.Stop(ctx)
	first.stopped = true
	if lo := first.do("GET", path+"/last_operation?operation="+op, nil); lo.str("state") != "in progress" {
		t.Fatalf("after the stop: %s", lo.raw)
	}

	second := setup(t, func(o *options) { o.dbURL = first.dbURL; o.keys = first.keys; o.timeout = 2 * time.Second })
	if lo := second.waitFor(path, op); lo.str("state") != "succeeded" {
		t.Fatalf("resumed provision ended %s", lo.raw)
	}
	r := second.expect(second.do("PUT", path+"/service_bindings/"+randomID("b"), bindBody()), 201)
	creds := r.body["credentials"].(map[string]any)
	connect(t, creds["uri"].(string)).Close(context.Background())
	second.expect(second.do("DELETE", path+q(planSmall), nil), 200)
	assertGone(t, id, creds["username"].(string))
}

// TestSecretsNeverInPlainText binds, then reads every row of the broker's
// schema as text and every log line: the password appears in neither.
func TestSecretsNeverInPlainText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := randomID("secret")
	path := "/v2/service_instances/" + id
	b.expect(b.do("PUT", path, provisionBody(planSmall, nil)), 201)
	r := b.expect(b.do("PUT", path+"/service_bindings/"+randomID("b"), bindBody()), 201)
	password := r.body["credentials"].(map[string]any)["password"].(string)
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'broker' AND c.relkind = 'r'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 4 {
		t.Fatalf("found only tables %v", tables)
	}
	for _, table := range tables {
		var dump string
		if err := b.pool.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM broker.`+table+` t`).Scan(&dump); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(dump, password) {
			t.Errorf("table broker.%s holds the binding password in plain text", table)
		}
	}
	b.expect(b.do("DELETE", path+q(planSmall), nil), 200)
	for _, secret := range []string{password, pass, token} {
		if strings.Contains(b.logs.String(), secret) {
			t.Errorf("a credential appears in the broker's log")
		}
	}
	if !strings.Contains(b.logs.String(), "operation succeeded") {
		t.Error("the log captured nothing: the check above proves nothing")
	}
}

package postgresql_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/pki"
)

// TestCredentialsKeepOnlyClientSettings: the broker's own TLS key and
// certificates, their password, its password and service files and its
// run-time parameters belong to the broker's connections; a binding's uri
// carries only what any client of the target needs to reach it the same
// way.
func TestCredentialsKeepOnlyClientSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := pki.NewCA("bindery test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"root.crt":   string(ca.CertPEM()),
		"pgpass":     "",
		"pg_service": "[bindery]\n",
		"client.crt": "",
		"client.key": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	broker := url.Values{
		"sslpassword":          {"broker-key-passphrase"},
		"sslkey":               {filepath.Join(dir, "client.key")},
		"sslcert":              {filepath.Join(dir, "client.crt")},
		"sslrootcert":          {filepath.Join(dir, "root.crt")},
		"passfile":             {filepath.Join(dir, "pgpass")},
		"service":              {"bindery"},
		"servicefile":          {filepath.Join(dir, "pg_service")},
		"application_name":     {"bindery-broker"},
		"search_path":          {"broker_schema"},
		"connect_timeout":      {"7"},
		"target_session_attrs": {"any"},
	}
	target := pgtest.AdminURL(t) + "&" + broker.Encode()
	d, err := postgresql.New(t.Context(), target, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := &bundle{ctx: t.Context(), admin: pgtest.AdminURL(t), driver: d}
	inst := b.provision(t, `{"connection_limit": 2}`)
	res := b.bind(t, inst, randomID(t))
	uri, err := url.Parse(res.Credentials["uri"].(string))
	if err != nil {
		t.Fatal(err)
	}
	want := "connect_timeout=7&sslmode=disable&target_session_attrs=any"
	if got := uri.RawQuery; got != want {
		t.Errorf("uri query %q, want %q", got, want)
	}
	for _, s := range []string{"broker-key-passphrase", dir, url.QueryEscape(dir), "bindery-broker", "broker_schema"} {
		for key, v := range res.Credentials {
			if str, ok := v.(string); ok && strings.Contains(str, s) {
				t.Errorf("credential %s carries the broker's %q", key, s)
			}
		}
	}
	b.connect(t, res)
}

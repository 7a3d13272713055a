package postgresql_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/broker/postgresql"
)

func TestNames(t *testing.T) {
	t.Parallel()
	n := postgresql.InstanceNames("instance-1")
	// sha256("instance-1") starts with these 24 hex digits.
	const h = "6212a06cac8b50f7a9f4a266"
	if n.Database != "bindery_i_"+h || n.Owner != "bindery_o_"+h {
		t.Errorf("InstanceNames = %+v", n)
	}
	if r := postgresql.BindingRole("instance-1"); r != "bindery_b_"+h {
		t.Errorf("BindingRole = %q", r)
	}
	for _, id := range []string{"", "x", `a"; DROP ROLE postgres; --`, "名前🙂", strings.Repeat("z", 10000)} {
		n := postgresql.InstanceNames(id)
		for _, name := range []string{n.Database, n.Owner, postgresql.BindingRole(id)} {
			if len(name) != 34 || strings.Trim(name[10:], "0123456789abcdef") != "" {
				t.Errorf("name %q for id %q: want prefix + 24 hex digits", name, id)
			}
		}
	}
}

func TestStatements(t *testing.T) {
	t.Parallel()
	n := postgresql.Names{Database: "bindery_i_abc", Owner: "bindery_o_abc"}
	full := postgresql.PlanConfig{ConnectionLimit: 20, StatementTimeout: 30 * time.Second, Extensions: []string{"pgcrypto", `we"ird`}}
	bare := postgresql.PlanConfig{ConnectionLimit: 3}
	const verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy"
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"provision fresh", postgresql.ProvisionStatements(n, full, postgresql.Existing{}), []string{
			`CREATE ROLE "bindery_o_abc" NOLOGIN`,
			`CREATE DATABASE "bindery_i_abc" CONNECTION LIMIT 20`,
			`ALTER DATABASE "bindery_i_abc" SET statement_timeout = 30000`,
			`REVOKE ALL ON DATABASE "bindery_i_abc" FROM PUBLIC`,
			`GRANT ALL ON DATABASE "bindery_i_abc" TO "bindery_o_abc"`,
		}},
		{"provision defaults", postgresql.ProvisionStatements(n, bare, postgresql.Existing{}), []string{
			`CREATE ROLE "bindery_o_abc" NOLOGIN`,
			`CREATE DATABASE "bindery_i_abc" CONNECTION LIMIT 3`,
			`ALTER DATABASE "bindery_i_abc" RESET statement_timeout`,
			`REVOKE ALL ON DATABASE "bindery_i_abc" FROM PUBLIC`,
			`GRANT ALL ON DATABASE "bindery_i_abc" TO "bindery_o_abc"`,
		}},
		{"provision again", postgresql.ProvisionStatements(n, full, postgresql.Existing{Owner: true, Database: true}), []string{
			`ALTER DATABASE "bindery_i_abc" OWNER TO CURRENT_USER`,
			`ALTER DATABASE "bindery_i_abc" CONNECTION LIMIT 20`,
			`ALTER DATABASE "bindery_i_abc" SET statement_timeout = 30000`,
			`REVOKE ALL ON DATABASE "bindery_i_abc" FROM PUBLIC`,
			`GRANT ALL ON DATABASE "bindery_i_abc" TO "bindery_o_abc"`,
		}},
		{"provision after role only", postgresql.ProvisionStatements(n, bare, postgresql.Existing{Owner: true}), []string{
			`CREATE DATABASE "bindery_i_abc" CONNECTION LIMIT 3`,
			`ALTER DATABASE "bindery_i_abc" RESET statement_timeout`,
			`REVOKE ALL ON DATABASE "bindery_i_abc" FROM PUBLIC`,
			`GRANT ALL ON DATABASE "bindery_i_abc" TO "bindery_o_abc"`,
		}},
		{"adopt", postgresql.AdoptStatements(n), []string{
			`ALTER DATABASE "bindery_i_abc" OWNER TO CURRENT_USER`,
			`REVOKE ALL ON DATABASE "bindery_i_abc" FROM PUBLIC`,
			`GRANT ALL ON DATABASE "bindery_i_abc" TO "bindery_o_abc"`,
		}},
		{"provision database", postgresql.ProvisionDatabaseStatements(n, full), []string{
			`SET LOCAL search_path TO public`,
			`CREATE EXTENSION IF NOT EXISTS "pgcrypto"`,
			`CREATE EXTENSION IF NOT EXISTS "we""ird"`,
			`ALTER SCHEMA public OWNER TO "bindery_o_abc"`,
			`REVOKE CREATE ON SCHEMA public FROM PUBLIC`,
		}},
		{"extensions none", postgresql.ExtensionStatements(bare), []string{}},
		{"update", postgresql.UpdateStatements(n, postgresql.PlanConfig{ConnectionLimit: 5, StatementTimeout: 1500 * time.Millisecond}, []string{"bindery_b_1"}), []string{
			`ALTER DATABASE "bindery_i_abc" CONNECTION LIMIT 5`,
			`ALTER DATABASE "bindery_i_abc" SET statement_timeout = 1500`,
			`ALTER ROLE "bindery_b_1" CONNECTION LIMIT 5`,
		}},
		{"update to defaults", postgresql.UpdateStatements(n, bare, nil), []string{
			`ALTER DATABASE "bindery_i_abc" CONNECTION LIMIT 3`,
			`ALTER DATABASE "bindery_i_abc" RESET statement_timeout`,
		}},
		{"bind", postgresql.BindStatements(n, "bindery_b_def", verifier, 20, false), []string{
			`CREATE ROLE "bindery_b_def" LOGIN CONNECTION LIMIT 20 PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy' IN ROLE "bindery_o_abc"`,
			`GRANT CONNECT ON DATABASE "bindery_i_abc" TO "bindery_b_def"`,
			`ALTER ROLE "bindery_b_def" IN DATABASE "bindery_i_abc" SET role = "bindery_o_abc"`,
		}},
		{"bind again", postgresql.BindStatements(n, "bindery_b_def", verifier, 20, true), []string{
			`ALTER ROLE "bindery_b_def" LOGIN CONNECTION LIMIT 20 PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy'`,
			`GRANT "bindery_o_abc" TO "bindery_b_def"`,
			`GRANT CONNECT ON DATABASE "bindery_i_abc" TO "bindery_b_def"`,
			`ALTER ROLE "bindery_b_def" IN DATABASE "bindery_i_abc" SET role = "bindery_o_abc"`,
		}},
		{"bind hostile verifier", postgresql.BindStatements(n, "r", `x' OR '1\`, 1, false)[:1], []string{
			`CREATE ROLE "r" LOGIN CONNECTION LIMIT 1 PASSWORD E'x'' OR ''1\\' IN ROLE "bindery_o_abc"`,
		}},
		{"unbind database", postgresql.UnbindDatabaseStatements(n, "bindery_b_def"), []string{
			`REASSIGN OWNED BY "bindery_b_def" TO "bindery_o_abc"`,
			`DROP OWNED BY "bindery_b_def"`,
		}},
		{"unbind", postgresql.UnbindStatements("bindery_b_def"), []string{
			`DROP ROLE IF EXISTS "bindery_b_def"`,
		}},
		{"deprovision", postgresql.DeprovisionStatements(n, []string{"bindery_b_1", "bindery_b_2"}), []string{
			`DROP DATABASE IF EXISTS "bindery_i_abc" WITH (FORCE)`,
			`DROP OWNED BY "bindery_b_1"`,
			`DROP ROLE IF EXISTS "bindery_b_1"`,
			`DROP OWNED BY "bindery_b_2"`,
			`DROP ROLE IF EXISTS "bindery_b_2"`,
			`DROP ROLE IF EXISTS "bindery_o_abc"`,
		}},
		{"undo provision", postgresql.UndoProvisionStatements(n, postgresql.Existing{Owner: true, Database: true}), []string{
			`DROP DATABASE IF EXISTS "bindery_i_abc" WITH (FORCE)`,
			`DROP ROLE IF EXISTS "bindery_o_abc"`,
		}},
		{"undo provision of the database only", postgresql.UndoProvisionStatements(n, postgresql.Existing{Database: true}), []string{
			`DROP DATABASE IF EXISTS "bindery_i_abc" WITH (FORCE)`,
		}},
		{"deprovision without bindings", postgresql.DeprovisionStatements(n, nil), []string{
			`DROP DATABASE IF EXISTS "bindery_i_abc" WITH (FORCE)`,
			`DROP ROLE IF EXISTS "bindery_o_abc"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(tt.got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

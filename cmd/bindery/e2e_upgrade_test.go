package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// previousRelease is the commit of main the upgrade test runs as the
// release before this one: the last commit before catalog migrations 0012
// (the catalogue's version) and 0013 (token revocations announced), so the
// previous release runs on a schema two steps ahead of its own. Bindery
// has no tagged release yet; when it has, this becomes the last tag's
// commit (docs/operations.md, "Upgrades").
const previousRelease = "84587b1d8a8d96921d936ac77d0598c13c4bb215"

// TestUpgradeWithPreviousReleaseRunning is a rolling update: the previous
// release (previousRelease, built from git) migrates a database and serves
// it — broker, catalog, engine — with an instance and a binding; this
// release migrates the schema forward (`bindery migrate up`) while it
// runs, and starts its catalog and engine beside it. Then, with both
// releases serving: what either catalog creates the engines make Ready
// and the other catalog reads, with the same credentials; a token revoked
// through the previous release's catalog stops at once on this release's
// (which keeps checked tokens, told of removals by migration 0013's
// trigger); a replica of the previous release restarted on the new schema
// serves with --no-migrate; each release's Kubernetes API watches what
// the other's creates (bothKubernetesAPIs); and deleting through the previous release
// removes what this one created, and the reverse. Last, this release restarts on a schema
// a later release migrated and serves on it.
func TestUpgradeWithPreviousReleaseRunning(t *testing.T) {
	t.Parallel()
	old := buildRelease(t, previousRelease)
	dbURL, key := pgtest.New(t), keyring.Generate()
	env := brokerEnv(dbURL, key)

	// The previous release, alone, on the schema it migrated.
	token := createToken(t, startWith(t, old, env, "token", "create", "--role", "admin"))
	oldBroker := serving(t, startWith(t, old, env, "serve", "broker", "--listen", "127.0.0.1:0"), "serving the OSB API")
	oldCatalog := startWith(t, old, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	before := api{t: t, base: serving(t, oldCatalog, "serving the REST API"), token: token}
	startWith(t, old, env, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	before.must(201, "POST", "/brokers", map[string]any{"name": "bindery", "url": oldBroker,
		"auth": map[string]any{"basic": map[string]any{"username": "osb-user", "password": "osb-password-1234"}}})
	first := provisionAndRead(before, "db1", "app1")

	// This release expands the schema while the previous one serves.
	mig := start(t, env, "migrate", "up")
	if err := mig.wait(t); err != nil || !strings.Contains(mig.stdout.String(), fmt.Sprintf("catalog\t%d", latestMigration(t, "catalog"))) {
		t.Fatalf("migrate up: %v\n%s%s", err, mig.stdout.String(), mig.stderr.String())
	}
	newCatalog := start(t, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	after := api{t: t, base: serving(t, newCatalog, "serving the REST API"), token: token}
	start(t, env, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback")

	// Both serve: each reads what the other made.
	after.sameCredentials(first)
	second := provisionAndRead(before, "db2", "app2")
	third := provisionAndRead(after, "db3", "app3")
	after.sameCredentials(second)
	before.sameCredentials(third)
	bothKubernetesAPIs(t, old, dbURL)

	// A token revoked through the previous release stops on this one, which
	// had checked (and kept) it a moment before.
	viewer := before.must(201, "POST", "/tokens", map[string]any{"name": "viewer", "role": "viewer"})
	seen := api{t: t, base: after.base, token: viewer["token"].(string)}
	seen.must(200, "GET", "/instances", nil)
	before.must(204, "DELETE", "/tokens/"+viewer["id"].(string), nil)
	eventually.Succeeds(t, 2*time.Second, func(context.Context) error {
		if status, _ := seen.do("GET", "/instances", nil); status != 401 {
			return fmt.Errorf("a token revoked through the previous release still answers %d on this one", status)
		}
		return nil
	})

	// A replica of the previous release restarted mid-rollout: it cannot
	// migrate a schema newer than it knows, and serves with --no-migrate.
	oldCatalog.terminate(t)
	refused := startWith(t, old, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	if err := refused.wait(t); err == nil {
		t.Error("the previous release migrated a schema newer than it knows without a word")
	}
	t.Logf("the previous release, restarted without --no-migrate: %s", lastLine(refused.stderr.String()))
	restarted := startWith(t, old, append(env, "BINDERY_NO_MIGRATE=true"), "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	before.base = serving(t, restarted, "serving the REST API")
	before.sameCredentials(third)

	// Deleting through the previous release what this one created, and
	// through this one what the previous one created.
	before.must(202, "DELETE", "/bindings/"+third.id, nil)
	after.waitGone("/bindings/" + third.id)
	after.must(202, "DELETE", "/bindings/"+first.id, nil)
	before.waitGone("/bindings/" + first.id)
	db1 := instanceID(before, "db1")
	after.must(202, "DELETE", "/instances/"+db1, nil)
	before.waitGone("/instances/" + db1)

	// When this release is the previous one: on a schema a later release
	// migrated (its version moved past this binary's last), it restarts
	// without --no-migrate and serves, saying so.
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE catalog.schema_migrations SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	next := start(t, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	after.base = serving(t, next, "serving the REST API")
	after.sameCredentials(second)
	if !strings.Contains(next.stderr.String(), "migrated by a newer release") {
		t.Errorf("this release on a newer schema did not say so:\n%s", next.stderr.String())
	}
}

// provisionAndRead provisions instance from the built-in broker's small
// plan, binds name to it and reads the binding's credentials, all through
// a.
func provisionAndRead(a api, instance, name string) bound {
	a.t.Helper()
	in := a.must(201, "POST", "/instances", map[string]any{"name": instance, "namespace": "demo",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}})
	a.waitReady("/instances/" + in["id"].(string))
	return restoredAPI{a}.bind(instance, name, false)
}

// instanceID is the id of instance name in namespace demo.
func instanceID(a api, name string) string {
	a.t.Helper()
	list := a.must(200, "GET", "/instances?namespace=demo", nil)
	items, _ := list["items"].([]any)
	for _, it := range items {
		if m := it.(map[string]any); m["name"] == name {
			return m["id"].(string)
		}
	}
	a.t.Fatalf("no instance %s in %v", name, list)
	return ""
}

// sameCredentials is restoredAPI's, for any catalog.
func (a api) sameCredentials(b bound) { restoredAPI{a}.sameCredentials(b) }

// createToken is the token `bindery token create` printed.
func createToken(t *testing.T, p *proc) string {
	t.Helper()
	if err := p.wait(t); err != nil {
		t.Fatalf("token create: %v\n%s", err, p.stderr.String())
	}
	return strings.TrimSpace(p.stdout.String())
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// buildRelease builds `bindery` at commit of this repository, as `make
// build` does, from `git archive` and the module cache (the Go module
// proxy when a module is missing), and keeps the binary in the user's
// cache directory, so the build happens once per commit and machine.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		// No cache directory (no HOME): built for this run only.
		cache = t.TempDir()
	}
	bin := filepath.Join(cache, "bindery-releases", commit, "bindery")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `cd "$(git rev-parse --show-toplevel)" && git archive "$1" | tar -x -C "$2"`, "sh", commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the test needs this repository's history): %v\n%s", commit, err, out)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := bin + fmt.Sprintf(".%d", os.Getpid())
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/bindery")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bindery at %s: %v\n%s", commit, err, out)
	}
	t.Logf("built bindery at %s in %v", commit[:7], time.Since(start).Round(time.Second))
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// latestMigration is the newest migration this release has for schema, read
// from migrations/ as the binary embeds it.
func latestMigration(t *testing.T, schema string) int {
	t.Helper()
	ups, err := filepath.Glob(filepath.Join("..", "..", "migrations", schema, "*.up.sql"))
	if err != nil || len(ups) == 0 {
		t.Fatalf("migrations of %s: %v", schema, err)
	}
	latest := 0
	for _, f := range ups {
		n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		latest = max(latest, n)
	}
	return latest
}

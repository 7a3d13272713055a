package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestRestoreReadsCredentialsWithTheKeys follows docs/operations.md's
// backup and restore: `bindery up` binds with key K1 and is backed up
// with pg_dump while it runs; the dump is restored with pg_restore into a
// fresh PostgreSQL, where Bindery started with the keys rotated ("K2,K1":
// a new key first, the old one still read) reads the binding's
// credentials and binds again (sealed with K2). That database is backed
// up and restored in turn, and both bindings' credentials are read there
// with "K2,K1". Started without K1 — with K2 alone, or with another key —
// Bindery refuses to start, naming K1 by its fingerprint. Once `bindery
// keys reseal` has sealed everything again with K2, K2 alone reads both.
func TestRestoreReadsCredentialsWithTheKeys(t *testing.T) {
	t.Parallel()
	k1, k2 := keyring.Generate(), keyring.Generate()
	target := "BINDERY_TARGET_DATABASE_URL=" + pgtest.New(t)
	base, err := os.MkdirTemp("", "bindery-restore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}

	// Before: a binding sealed with K1, and an online backup.
	up, a := upOn(t, filepath.Join(base, "up1"), pgtest.New(t), k1, target)
	first := a.bind("db", "app", true)
	dump := filepath.Join(base, "before.dump")
	pgDump(t, up.envValue("DATABASE_URL"), dump)
	up.terminate(t)

	// A fresh PostgreSQL, the dump restored into it.
	ctx := t.Context()
	fresh, err := pgserver.Start(ctx, filepath.Join(base, "fresh"), pgserver.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fresh.Stop() })
	restored := pgRestore(t, fresh, "bindery", dump)

	// The keys rotated: the old binding is read, a new one sealed with K2.
	up, a = upOn(t, filepath.Join(base, "up2"), restored, k2+","+k1, target)
	a.token = first.token
	a.sameCredentials(first)
	second := a.bind("db", "app2", false)
	pgDump(t, restored, filepath.Join(base, "rotated.dump"))
	up.terminate(t)

	// Restored again: both read with the rotated keys.
	again := pgRestore(t, fresh, "bindery_again", filepath.Join(base, "rotated.dump"))
	catalogProc := start(t, []string{"DATABASE_URL=" + again, "BINDERY_ENCRYPTION_KEY=" + k2 + "," + k1},
		"serve", "catalog", "--listen", "127.0.0.1:0")
	a = restoredAPI{api: api{t: t, base: serving(t, catalogProc, "serving the REST API"), token: first.token}}
	a.sameCredentials(first)
	a.sameCredentials(second)
	catalogProc.terminate(t)

	// Without K1, whose fingerprint the refusal names.
	for _, keys := range []string{k2, keyring.Generate()} {
		p := start(t, []string{"DATABASE_URL=" + again, "BINDERY_ENCRYPTION_KEY=" + keys}, "serve", "catalog", "--listen", "127.0.0.1:0")
		err := p.wait(t)
		msg := p.stderr.String()
		if err == nil || !strings.Contains(msg, "sealed with key "+fingerprint(t, k1)) || !strings.Contains(msg, "BINDERY_ENCRYPTION_KEY") {
			t.Errorf("serve catalog on a restore without its key: %v, want a refusal naming key %s and BINDERY_ENCRYPTION_KEY:\n%s", err, fingerprint(t, k1), msg)
		}
		if strings.Contains(msg, k1) || strings.Contains(msg, keys) {
			t.Error("the refusal shows a key")
		}
		t.Logf("refused: %s", strings.TrimSpace(msg))
	}

	// Every secret sealed again with K2 (the first binding's, in the
	// catalog and in the broker): K1 can be dropped.
	reseal := start(t, []string{"DATABASE_URL=" + again, "BINDERY_ENCRYPTION_KEY=" + k2 + "," + k1}, "keys", "reseal")
	if err := reseal.wait(t); err != nil {
		t.Fatalf("keys reseal: %v\n%s", err, reseal.stderr.String())
	}
	out := reseal.stdout.String()
	for _, want := range []string{"catalog: 1 secrets sealed again with key " + fingerprint(t, k2), "broker: 1 secrets sealed again"} {
		if !strings.Contains(out, want) {
			t.Errorf("keys reseal said %q, want %q", out, want)
		}
	}
	catalogProc = start(t, []string{"DATABASE_URL=" + again, "BINDERY_ENCRYPTION_KEY=" + k2}, "serve", "catalog", "--listen", "127.0.0.1:0")
	a = restoredAPI{api: api{t: t, base: serving(t, catalogProc, "serving the REST API"), token: first.token}}
	a.sameCredentials(first)
	a.sameCredentials(second)
	catalogProc.terminate(t)
}

// restoredAPI is the REST API of a Bindery on a restored database.
type restoredAPI struct{ api }

// bound is a binding and what it was read as.
type bound struct {
	id, token   string
	credentials map[string]any
}

// upOn runs `bindery up` on dbURL with keys and waits for its banner.
func upOn(t *testing.T, dataDir, dbURL, keys string, env ...string) (*proc, restoredAPI) {
	t.Helper()
	p := start(t, append([]string{"DATABASE_URL=" + dbURL, "BINDERY_ENCRYPTION_KEY=" + keys}, env...),
		"up", "--data-dir", dataDir, "--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0",
		"--controller-listen", "127.0.0.1:0", "--apiserver-listen", "127.0.0.1:0", "--webhook-listen", "")
	eventually.Succeeds(t, 2*time.Minute, func(context.Context) error {
		p.failIfExited(t)
		if !strings.Contains(p.stdout.String(), "Press Ctrl-C") {
			return fmt.Errorf("no banner:\n%s\n%s", p.stdout.String(), p.stderr.String())
		}
		return nil
	})
	shown := printed(p.stdout.String())
	return p, restoredAPI{api{t: t, base: strings.TrimSuffix(shown["web UI"], "/"), token: shown["admin token"]}}
}

// bind binds name to the built-in broker's instance (provisioned first
// when provision) and reads its credentials.
func (a restoredAPI) bind(instance, name string, provision bool) bound {
	a.t.Helper()
	if provision {
		// The built-in broker registers itself shortly after the banner.
		eventually.Succeeds(a.t, time.Minute, func(context.Context) error {
			status, body := a.do("POST", "/instances", map[string]any{"name": instance, "namespace": "demo",
				"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}})
			if status != 201 {
				return fmt.Errorf("provision: %d %v", status, body)
			}
			return nil
		})
	}
	b := a.must(201, "POST", "/bindings", map[string]any{"name": name, "namespace": "demo",
		"spec": map[string]any{"instanceRef": map[string]any{"name": instance}}})
	id := b["id"].(string)
	a.waitReady("/bindings/" + id)
	return bound{id: id, token: a.token, credentials: a.must(200, "GET", "/bindings/"+id+"/credentials", nil)}
}

// sameCredentials reads b's credentials and checks they are what they
// were.
func (a restoredAPI) sameCredentials(b bound) {
	a.t.Helper()
	got := a.must(200, "GET", "/bindings/"+b.id+"/credentials", nil)
	if got["password"] == nil || fmt.Sprint(got) != fmt.Sprint(b.credentials) {
		a.t.Errorf("credentials of binding %s after the restore differ, or are empty", b.id)
	}
}

// pgDump backs up dbURL's database with pg_dump's custom format, as
// docs/operations.md says.
func pgDump(t *testing.T, dbURL, file string) {
	t.Helper()
	tool, err := pgserver.Tool("pg_dump")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "--format=custom", "--file", file, "--dbname", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
}

// pgRestore creates database name on srv and restores file into it, as
// docs/operations.md says; it returns the database's URL.
func pgRestore(t *testing.T, srv *pgserver.Server, name, file string) string {
	t.Helper()
	dbURL, err := srv.EnsureDatabase(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	tool, err := pgserver.Tool("pg_restore")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "--no-owner", "--no-privileges", "--exit-on-error", "--dbname", dbURL, file).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	return dbURL
}

// fingerprint is a key's fingerprint as docs/operations.md computes it:
// `printf %s KEY | base64 -d | sha256sum | cut -c1-8`.
func fingerprint(t *testing.T, key string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:8]
}

package pgserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// TestSuperviseRestarts: kill -9 of the server's postmaster, with a
// session open, twice: Supervise starts it again on the same port, with
// the same data. The first time, the server cannot start at first (a bad
// setting the test writes, then takes back): Status and the log say so,
// and the next attempt after the setting is fixed succeeds.
func TestSuperviseRestarts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempBase(t), "pg")
	ctx := context.Background()
	s, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	// Fast turns synchronous_commit off: the checkpoint makes the row
	// durable before the kills.
	mustQuery(t, s.URL("postgres"), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	mustQuery(t, s.URL("postgres"), "CHECKPOINT")
	logs := &syncbuf.Buffer{}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Supervise(sctx, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	defer func() { stop(); <-done }()
	autoConf := filepath.Join(s.dataDir, "postgresql.auto.conf")
	good, err := os.ReadFile(autoConf)
	if err != nil {
		t.Fatal(err)
	}

	for round := 1; round <= 2; round++ {
		held, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := s.postmasterPID()
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			// Written in place: the file keeps PostgreSQL's user as owner.
			if err := os.WriteFile(autoConf, append(slices.Clone(good), "max_connections = 'lots'\n"...), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
				if err := s.Status(ctx); err == nil || !strings.Contains(err.Error(), "the embedded PostgreSQL exited at") ||
					!strings.Contains(err.Error(), "restart attempt") {
					return fmt.Errorf("Status %v, want it to say the server exited and a restart failed", err)
				}
				return nil
			})
			if err := os.WriteFile(autoConf, good, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			if t.Failed() {
				tail, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
				t.Logf("supervisor:\n%s\npostgres.log:\n%s", logs, tail[:min(len(tail), 6000)])
			}
		})
		eventually.Succeeds(t, 60*time.Second, func(ctx context.Context) error {
			if err := s.Status(ctx); err != nil {
				return err
			}
			conn, err := pgx.Connect(ctx, s.URL("postgres"))
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			var v int
			return conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v)
		})
		t.Logf("round %d: back %s after kill -9", round, time.Since(killed).Round(time.Millisecond))
		held.Close(ctx)
		if again, err := s.postmasterPID(); err != nil || again == pid {
			t.Errorf("postmaster after the restart: %d (%v), killed %d", again, err, pid)
		}
	}
	// Killed within a minute of its start each time, as in a crash loop:
	// each restart waits longer than the one before, on one backoff that
	// the failed attempt in between has stepped too.
	var waits []time.Duration
	for _, m := range regexp.MustCompile(`exited; restarting it".* after=(\S+)`).FindAllStringSubmatch(logs.String(), -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, d)
	}
	if len(waits) != 2 || waits[0] <= 0 || waits[1] <= 2*waits[0] {
		t.Errorf("the restarts waited %v, want two, each more than twice the last", waits)
	}
	for want, n := range map[string]int{
		"the embedded PostgreSQL exited; restarting it": 2, "the embedded PostgreSQL is back": 2, "restart the embedded PostgreSQL": 1,
	} {
		if got := strings.Count(logs.String(), want); got < n {
			t.Errorf("the log says %q %d times, want %d:\n%s", want, got, n, logs)
		}
	}
}

package pgfence

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestAdmit: a primary on an older timeline than the newest seen of its
// cluster is refused, with an error that says what to do; standbys, newer
// primaries and other clusters are admitted.
func TestAdmit(t *testing.T) {
	t.Parallel()
	f := New(nil)
	steps := []struct {
		server string
		p      place
		fenced bool
	}{
		{"a", place{system: "1", timeline: 1}, false},
		{"b", place{system: "1", recovery: true, timeline: 1}, false},
		{"b", place{system: "1", timeline: 2}, false}, // promoted
		{"a", place{system: "1", timeline: 1}, true},  // the old primary, back
		{"a", place{system: "1", recovery: true, timeline: 1}, false},
		{"a", place{system: "1", recovery: true, timeline: 2}, false}, // rejoined
		{"c", place{system: "2", timeline: 1}, false},                 // another cluster (a restore)
		{"b", place{system: "1", timeline: 2}, false},
		{"a", place{system: "1", timeline: 3}, false}, // promoted in turn
		{"b", place{system: "1", timeline: 2}, true},
	}
	for i, s := range steps {
		err := f.admit(s.server, s.p)
		var fe *FencedError
		if got := errors.As(err, &fe); got != s.fenced {
			t.Fatalf("step %d (%s %+v): %v, want fenced %v", i, s.server, s.p, err, s.fenced)
		}
		if fe != nil && (!strings.Contains(err.Error(), "former primary") || !strings.Contains(err.Error(), "pg_rewind")) {
			t.Errorf("step %d: %q says neither what the server is nor what to do", i, err)
		}
	}
	if tl, _ := f.Newest("1"); tl != 3 {
		t.Errorf("newest timeline %d, want 3", tl)
	}
}

// TestReadPlace reads a real primary's place as a role without
// privileges, through an installed fence, and a survey learns it.
func TestReadPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.New(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	role := "fence_" + strings.ToLower(t.Name())
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE "+role) })
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, "pw"
	f := New(nil)
	f.Install(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect through the fence: %v", err)
	}
	defer conn.Close(ctx)
	p, err := readPlace(ctx, conn.PgConn())
	if err != nil {
		t.Fatal(err)
	}
	if p.recovery || p.timeline != 1 || p.system == "" {
		t.Fatalf("place %+v, want a primary on timeline 1", p)
	}
	if tl, ok := f.Newest(p.system); !ok || tl != 1 {
		t.Errorf("the fence learnt %d %v, want timeline 1", tl, ok)
	}
	g := New(nil)
	if g.Survey(ctx, &cfg.Config) {
		t.Error("a first survey reported a newer timeline")
	}
	if tl, ok := g.Newest(p.system); !ok || tl != 1 {
		t.Errorf("the survey learnt %d %v, want timeline 1", tl, ok)
	}
}

// Package pgfence keeps a process from writing to a PostgreSQL primary
// that a failover has replaced.
//
// A failover promotes a standby onto a new timeline. The old primary, if
// it comes back as a primary (started by hand, or by a manager that lost
// track of it), accepts writes as readily as the new one, and a database
// URL that names several hosts with target_session_attrs=read-write would
// take whichever it reaches first: writes there are lost when it is made a
// standby again, and readers there see a past that never happened. A
// Fence refuses, at every connection, a primary on an older timeline of
// the same cluster (system identifier) than the newest this process has
// seen, and learns the newest timeline by asking every host of the URL
// when the process starts and then every so often (Run), so that a
// process that starts, or keeps its connections, while a former primary
// is back, does not use it.
package pgfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Fence is what one process knows of its database's timelines. It is
// safe for concurrent use.
type Fence struct {
	log *slog.Logger

	mu sync.Mutex
	// newest is the newest timeline seen, by system identifier.
	newest map[string]int64
	// refused is, by server address, the newest timeline it was refused
	// under, so that a refusal is logged once.
	refused map[string]int64
}

// New returns a Fence that logs the servers it refuses to log.
func New(log *slog.Logger) *Fence {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Fence{log: log, newest: map[string]int64{}, refused: map[string]int64{}}
}

// FencedError is the refusal of a former primary.
type FencedError struct {
	// Server is the address of the former primary.
	Server string
	// Timeline is the server's, Newest the cluster's newest.
	Timeline, Newest int64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("PostgreSQL at %s is a former primary (timeline %d; the cluster's primary is on timeline %d since a failover): "+
		"not used. Make it a standby of the new primary (pg_rewind), or take it out of the database URL", e.Server, e.Timeline, e.Newest)
}

// Install makes every connection made with cfg, and with its copies (the
// change-feed followers' and the claims' connections copy it), pass the
// fence after the checks cfg makes already (target_session_attrs).
func (f *Fence) Install(cfg *pgconn.Config) {
	prev := cfg.ValidateConnect
	cfg.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		return f.check(ctx, c)
	}
}

// place is where a server stands: its cluster, whether it is a standby,
// and its timeline.
type place struct {
	system   string
	recovery bool
	timeline int64
}

// placeQuery reads a server's place. A primary's timeline is its WAL's
// (in the name of the current WAL file, which changes the moment it is
// promoted); a standby's is that of its last restartpoint, which is
// enough to learn from. Every role may run it.
const placeQuery = `SELECT system_identifier::text, pg_is_in_recovery(),
	CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::text
	ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END
	FROM pg_control_system()`

func readPlace(ctx context.Context, c *pgconn.PgConn) (place, error) {
	res := c.ExecParams(ctx, placeQuery, nil, nil, nil, nil).Read()
	if res.Err != nil {
		// Not a *pgconn.PgError: pgx stops trying the other hosts on some
		// of those (insufficient privilege), and this one may be only a
		// standby's.
		return place{}, fmt.Errorf("read the server's timeline: %v", res.Err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 3 {
		return place{}, errors.New("read the server's timeline: no answer")
	}
	row := res.Rows[0]
	p := place{system: string(row[0]), recovery: string(row[1]) == "t"}
	base := 10
	if !p.recovery {
		base = 16 // the WAL file name's first eight hexadecimal digits
	}
	tl, err := strconv.ParseInt(string(row[2]), base, 64)
	if err != nil {
		return place{}, fmt.Errorf("read the server's timeline: %q: %v", row[2], err)
	}
	p.timeline = tl
	return p, nil
}

// check reads the server's place and admits it or not.
func (f *Fence) check(ctx context.Context, c *pgconn.PgConn) error {
	p, err := readPlace(ctx, c)
	if err != nil {
		return err
	}
	return f.admit(c.Conn().RemoteAddr().String(), p)
}

// admit learns from p, and refuses a primary on an older timeline than
// the newest seen of its cluster. Standbys are admitted: they take no
// writes.
func (f *Fence) admit(server string, p place) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	newest, known := f.newest[p.system]
	if !known || p.timeline > newest {
		if known {
			f.log.Info("PostgreSQL is on a new timeline: a standby was promoted", "server", server, "timeline", p.timeline, "previous", newest)
		}
		f.newest[p.system] = p.timeline
		return nil
	}
	if p.recovery || p.timeline == newest {
		return nil
	}
	if f.refused[server] != newest {
		f.refused[server] = newest
		f.log.Warn("not using a former primary", "server", server, "timeline", p.timeline, "newest", newest)
	}
	return &FencedError{Server: server, Timeline: p.timeline, Newest: newest}
}

// Newest is the newest timeline seen of the cluster, and whether one was.
func (f *Fence) Newest(system string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tl, ok := f.newest[system]
	return tl, ok
}

// surveyTimeout bounds one look at one host.
const surveyTimeout = 5 * time.Second

// Survey asks every host cfg names for its place and learns from the
// answers; hosts it cannot reach within a few seconds are passed over.
// It reports whether it found a newer timeline than it knew.
func (f *Fence) Survey(ctx context.Context, cfg *pgconn.Config) bool {
	hosts := hostsOf(cfg)
	places := make([]*place, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			c := cfg.Copy()
			c.Host, c.Port, c.TLSConfig = h.Host, h.Port, h.TLSConfig
			c.Fallbacks, c.ValidateConnect, c.AfterConnect = nil, nil, nil
			c.ConnectTimeout = surveyTimeout
			cctx, cancel := context.WithTimeout(ctx, surveyTimeout)
			defer cancel()
			conn, err := pgconn.ConnectConfig(cctx, c)
			if err != nil {
				return
			}
			defer conn.Close(context.WithoutCancel(cctx)) //nolint:errcheck // a look only
			if p, err := readPlace(cctx, conn); err == nil {
				places[i] = &p
			}
		})
	}
	wg.Wait()
	newer := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range places {
		if p == nil {
			continue
		}
		if tl, ok := f.newest[p.system]; ok && p.timeline > tl {
			newer = true
		}
		if p.timeline > f.newest[p.system] {
			f.newest[p.system] = p.timeline
		}
	}
	return newer
}

// Several tells whether cfg names more than one server.
func Several(cfg *pgconn.Config) bool { return len(hostsOf(cfg)) > 1 }

// hostsOf lists the servers cfg names, each once (a host is named twice
// when TLS is optional: with it and without).
func hostsOf(cfg *pgconn.Config) []*pgconn.FallbackConfig {
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	seen := map[string]bool{}
	var out []*pgconn.FallbackConfig
	for _, h := range all {
		addr := net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
		if !seen[addr] {
			seen[addr] = true
			out = append(out, h)
		}
	}
	return out
}

// Run surveys cfg's hosts every interval until ctx ends, and calls
// newer when a host is on a newer timeline than any seen before: the
// process then drops the connections it holds (which may be to a former
// primary that never went away, cut off from the others), and each new
// one passes the fence.
func (f *Fence) Run(ctx context.Context, cfg *pgconn.Config, interval time.Duration, newer func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.Survey(ctx, cfg) {
				newer()
			}
		}
	}
}

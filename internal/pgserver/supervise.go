package pgserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// restartBackoff paces the restarts of a server that exited: from a
// quarter of a second, doubling, up to 30 s, with jitter.
var restartBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// health is what Supervise knows of the server: nil while it runs.
type health struct {
	mu   sync.Mutex
	down error
}

func (h *health) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = err
}

// Status says why the server is not serving, or nil while it is (or while
// nobody supervises it): what Supervise saw last, for a readiness check.
func (s *Server) Status(context.Context) error {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.down
}

// stableAfter is how long a restarted server must run before its next exit
// is restarted at once again: one that keeps exiting sooner (a crash loop)
// is restarted later and later, on one backoff.
const stableAfter = time.Minute

// Supervise watches the server Start runs and starts it again whenever it
// exits (killed, crashed, stopped by hand), with backoff, until ctx ends;
// each exit, failed attempt and recovery is logged, and Status says what
// is going on meanwhile. The backoff carries on across exits until the
// server stays up for stableAfter. It returns when ctx ends. An adopted
// server (Use) is not this process's to restart: Supervise returns at
// once.
func (s *Server) Supervise(ctx context.Context, log *slog.Logger) {
	if s.lock == nil {
		return
	}
	backoff := restartBackoff
	started := time.Now()
	for {
		pid, err := s.postmasterPID()
		if err == nil {
			err = waitExit(ctx, pid)
		}
		if ctx.Err() != nil {
			return
		}
		since := time.Now()
		var delay time.Duration
		if since.Sub(started) < stableAfter {
			delay = backoff.Step()
		} else {
			backoff = restartBackoff
		}
		log.Error("the embedded PostgreSQL exited; restarting it", "pid", pid, "error", err, "after", delay.Round(time.Millisecond))
		s.health.set(fmt.Errorf("the embedded PostgreSQL exited at %s; restarting it", since.Format(time.TimeOnly)))
		if !sleep(ctx, delay) || !s.restart(ctx, log, since, &backoff) {
			return
		}
		started = time.Now()
	}
}

// restart starts the server again until it runs (true) or ctx ends,
// pacing its attempts with backoff.
func (s *Server) restart(ctx context.Context, log *slog.Logger, since time.Time, backoff *wait.Backoff) bool {
	for attempt := 1; ; attempt++ {
		_ = s.lock.set(stateStarting)
		err := s.start(ctx, s.opts)
		if err == nil {
			_ = s.lock.set(stateReady)
			s.health.set(nil)
			log.Info("the embedded PostgreSQL is back", "attempts", attempt, "down", time.Since(since).Round(time.Millisecond))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		next := backoff.Step()
		first, _, _ := strings.Cut(err.Error(), "\n")
		log.Warn("restart the embedded PostgreSQL", "attempt", attempt, "error", first, "next", next.Round(time.Millisecond))
		s.health.set(fmt.Errorf("the embedded PostgreSQL exited at %s; restart attempt %d failed (%s), next in %s",
			since.Format(time.TimeOnly), attempt, first, next.Round(time.Second)))
		if !sleep(ctx, next) {
			return false
		}
	}
}

// sleep waits for d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// postmasterPID reads the server's process id from postmaster.pid.
func (s *Server) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("postmaster.pid holds no process id (%q)", first)
	}
	return pid, nil
}

// waitExit returns once process pid has exited, or ctx has ended. It waits
// on a pidfd, which becomes readable when the process exits; where the
// kernel has none (before Linux 5.3) it looks twice a second.
func waitExit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return pollExit(ctx, pid)
	}
	defer unix.Close(fd)
	for ctx.Err() == nil {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 500)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return pollExit(ctx, pid)
		case n > 0:
			return nil
		}
	}
	return nil
}

func pollExit(ctx context.Context, pid int) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// lockName is the file, in a server's directory, whose lock (flock) says
// which process runs the server: one that serves for long (Start, as
// `bindery up` does) or one that needs the database for a moment (Use, as
// `bindery token` does). The lock dies with its process, so a crash leaves
// no stale owner; the file's text names the holder for the others.
const lockName = "bindery.lock"

// The holder's roles and states, as written in the lock file.
const (
	roleServe     = "serve"
	roleUse       = "use"
	stateStarting = "starting"
	stateReady    = "ready"
)

// lockWait bounds how long Start and Use wait for a short-lived holder
// (a Use running its own server for a moment).
const lockWait = 2 * time.Minute

// holder is what the lock file says of the process holding the lock.
type holder struct {
	role  string
	pid   int
	state string
}

// String names the holder for error messages.
func (h holder) String() string {
	if h.role == roleServe {
		return fmt.Sprintf("process %d (bindery up?)", h.pid)
	}
	return fmt.Sprintf("process %d", h.pid)
}

// alive tells whether the holder's process still runs; a file left by a
// dead process (the lock itself died with it) names nobody.
func (h holder) alive() bool {
	if h.pid <= 0 {
		return false
	}
	err := syscall.Kill(h.pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// dirLock is a held lock on a server's directory.
type dirLock struct {
	f    *os.File
	role string
}

// tryLock takes dir's lock without waiting. When another process holds
// it, it returns nil and what the file says of that process.
func tryLock(dir, role string) (*dirLock, holder, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, holder{}, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, holder{}, fmt.Errorf("lock %s: %w", path, err)
		}
		return nil, readHolder(path), nil
	}
	l := &dirLock{f: f, role: role}
	if err := l.set(stateStarting); err != nil {
		l.release()
		return nil, holder{}, err
	}
	return l, holder{}, nil
}

// set records the holder's state in the lock file.
func (l *dirLock) set(state string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(fmt.Sprintf("%s %d %s\n", l.role, os.Getpid(), state)), 0)
	return err
}

// release empties the file (so that nobody reads a holder that has gone)
// and drops the lock.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
}

func readHolder(path string) holder {
	b, err := os.ReadFile(path)
	if err != nil {
		return holder{}
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return holder{}
	}
	pid, _ := strconv.Atoi(f[1])
	return holder{role: f[0], pid: pid, state: f[2]}
}

// lockRetry spaces out looks at a busy lock: from 50 ms doubling to 800 ms,
// each with up to a quarter as much again of jitter (so never over a
// second), so that processes waiting together do not look in step.
var lockRetry = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.25, Steps: math.MaxInt32, Cap: 800 * time.Millisecond}

// backoff waits for retry's next step before the next look at the lock, or
// until ctx ends or the deadline passes.
func backoff(ctx context.Context, retry *wait.Backoff, deadline time.Time) error {
	d := retry.Step()
	if time.Now().Add(d).After(deadline) {
		return errLockWait
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var errLockWait = errors.New("gave up waiting")

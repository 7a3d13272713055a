package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// process is one control-plane binary started by the cluster.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	err     error         // how it exited; read only after done is closed
}

// spawn starts bin/name with args, its output in a log file in the cluster's
// directory, in its own process group, and stops it with the cluster.
func (c *Cluster) spawn(name string, args ...string) (*process, error) {
	p, err := c.startProcess(name, filepath.Join(c.bin, name), args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// startProcess starts the program at path as spawn does, but leaves stopping
// it to the caller. Its log is appended to, so that a process started again
// (a kubelet restarted by a test) keeps what the first one wrote.
func (c *Cluster) startProcess(name, path string, args ...string) (*process, error) {
	p := &process{name: name, logPath: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = c.dir
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so that stopping it reaches anything it starts.
		Setpgid: true,
		// Killed when the test binary dies without running cleanups (a
		// -timeout panic, a SIGKILL), so no process outlives the test.
		Pdeathsig: syscall.SIGKILL,
	}
	err = c.spawner.do(p.cmd.Start)
	log.Close() // the child holds its own copy
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process's group and, if the process has not
// exited after grace, SIGKILL; it returns once the process has exited.
func (p *process) stop(grace time.Duration) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	err := p.signal(syscall.SIGKILL)
	<-p.done
	return err
}

// signal sends sig to the process's group; a group that has already exited
// is not an error.
func (p *process) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	return nil
}

// spawner starts processes from one OS thread that lives as long as the
// cluster. Pdeathsig fires when the thread that started the child exits, not
// the process (https://github.com/golang/go/issues/27505), and Go ends a
// thread whenever a goroutine exits while locked to it — as network-namespace
// code does — so without this a child could be killed in the middle of a test.
type spawner struct {
	work chan func()
}

func newSpawner() *spawner {
	s := &spawner{work: make(chan func())}
	go func() {
		// Never unlocked: when close ends this goroutine, the thread exits
		// with it, after the cluster's processes have been stopped.
		runtime.LockOSThread()
		for f := range s.work {
			f()
		}
	}()
	return s
}

// do runs f on the spawner's thread and returns its error.
func (s *spawner) do(f func() error) error {
	errc := make(chan error, 1)
	s.work <- func() { errc <- f() }
	return <-errc
}

// close ends the spawner's thread. Call it only once every process it started has exited.
func (s *spawner) close() { close(s.work) }

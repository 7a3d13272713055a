package apiserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// serverProcess is `bindery serve apiserver`, built from this module and
// run as its own process, as deploy/bindery runs it: what a benchmark
// measures the memory of.
type serverProcess struct {
	t       testing.TB
	bin     string
	args    []string
	env     []string
	addr    netip.AddrPort
	dataDir string
	caData  []byte
	cmd     *exec.Cmd
	stderr  *syncbuf.Buffer
	done    chan error
	stopped bool // by stop, since the last start
}

// startServerProcess builds bindery and starts `bindery serve apiserver` on
// ip, on the database at dbURL, delegating to the cluster of kubeconfig,
// with a serving certificate for host (standalone when kubeconfig is "":
// its own kubeconfig is then in dataDir). It returns once the server says
// it serves, and stops it when t ends.
func startServerProcess(t testing.TB, ip netip.Addr, dbURL, kubeconfig, host string) *serverProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bindery")
	build := exec.Command("go", "build", "-o", bin, "github.com/bindery-dev/bindery/cmd/bindery")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build builds it
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build bindery: %v\n%s", err, out)
	}
	// A free port: the server takes an address, not a socket.
	l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr).AddrPort()
	l.Close()
	dataDir := t.TempDir()
	p := &serverProcess{
		t: t, bin: bin, addr: addr, dataDir: dataDir,
		args: []string{"serve", "apiserver", "--listen", addr.String(), "--data-dir", dataDir, "--log-level", "warn", "--no-migrate"},
		env:  []string{"DATABASE_URL=" + dbURL, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
	}
	if kubeconfig != "" {
		p.args = append(p.args, "--kubeconfig", kubeconfig, "--tls-hosts", host)
	}
	p.start()
	t.Cleanup(p.stop)
	if p.caData, err = os.ReadFile(filepath.Join(dataDir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs the server and waits until it prints that it serves.
func (p *serverProcess) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = p.env
	p.stderr = &syncbuf.Buffer{}
	p.cmd.Stderr = p.stderr
	// Killed with the test binary when it dies without cleaning up.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	serving := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		said := false
		for s.Scan() {
			if !said && strings.HasPrefix(s.Text(), "Kubernetes API:") {
				said = true
				serving <- true
			}
		}
		if !said {
			serving <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	p.done, p.stopped = make(chan error, 1), false
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case ok := <-serving:
		if !ok {
			p.t.Fatalf("bindery serve apiserver ended before serving:\n%s", p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		p.t.Fatalf("bindery serve apiserver did not serve within 60s:\n%s", p.stderr.String())
	}
}

// restart stops the server and starts it again, at the same address with
// the same certificates: a replica restarted on a catalog that holds
// everything already.
func (p *serverProcess) restart() {
	p.t.Helper()
	p.stop()
	p.start()
}

// stop interrupts the server, as a Pod's termination does, and fails the
// test unless it ends cleanly within 30 seconds. Once stopped, it is
// stopped: stop again does nothing until the next start.
func (p *serverProcess) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("bindery serve apiserver after Ctrl-C: %v\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("bindery serve apiserver did not stop within 30s of Ctrl-C")
	}
}

// pid is the server's process id.
func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// resetPeakRSS starts the peak resident set size of process pid afresh
// (proc(5): writing 5 to clear_refs resets VmHWM).
func resetPeakRSS(tb testing.TB, pid int) {
	tb.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		tb.Fatal(err)
	}
}

// memoryMB reads field (VmRSS: resident now, VmHWM: the peak since start
// or resetPeakRSS) of process pid's /proc status, in MB.
func memoryMB(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				tb.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	tb.Fatal(errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status"))
	return 0
}

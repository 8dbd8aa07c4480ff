package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Child processes must never outlive the test process. Two mechanisms ensure
// it, because each alone has a gap:
//
//   - Every child gets its own process group (Setpgid), so Stop can signal the
//     whole group, including anything the child forked.
//   - Every child gets SIGKILL from the kernel when its parent dies
//     (PR_SET_PDEATHSIG), which covers what no deferred Stop can: a test
//     timeout (the testing package calls os.Exit), a panic in another
//     goroutine, or kill -9 of the test binary.
//
// The kernel sends the parent-death signal when the *thread* that forked the
// child exits, not the process. Go may end an OS thread whose goroutine
// returns while locked to it, so children are forked from a launcher: a
// goroutine locked to its own thread for the lifetime of the cluster, ended
// only after the cluster's processes are gone.
//
// envtest starts etcd and kube-apiserver itself, with Setpgid but without a
// parent-death signal. Their paths therefore point at small wrapper scripts
// that exec this very binary with two environment variables; the init hook
// below sets the parent-death signal and then execs the real binary in place,
// keeping the process id that envtest waits for and signals.

const (
	// execTargetEnv holds the real binary the init hook execs.
	execTargetEnv = "MOVE_OPERATOR_LOCALCLUSTER_EXEC"
	// execParentEnv holds the pid of the test process; if the wrapper's parent
	// is already someone else, the test process died before the signal was set.
	execParentEnv = "MOVE_OPERATOR_LOCALCLUSTER_PARENT"
)

func init() {
	target := os.Getenv(execTargetEnv)
	if target == "" {
		return
	}
	execWithParentDeathSignal(target, os.Getenv(execParentEnv))
}

// execWithParentDeathSignal replaces the current process image with target,
// after asking the kernel to SIGKILL it when its parent dies. It never returns.
func execWithParentDeathSignal(target, parent string) {
	// The parent-death setting belongs to the calling thread, and only the
	// thread that calls execve survives it: both must be the same thread.
	runtime.LockOSThread()
	_ = os.Unsetenv(execTargetEnv)
	_ = os.Unsetenv(execParentEnv)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: setting the parent-death signal before exec of %s: %v\n", target, err)
		os.Exit(127)
	}
	if parent != "" && strconv.Itoa(os.Getppid()) != parent {
		fmt.Fprintf(os.Stderr, "localcluster: parent %s exited before %s started\n", parent, target)
		os.Exit(127)
	}
	args := append([]string{target}, os.Args[1:]...)
	err := syscall.Exec(target, args, os.Environ())
	fmt.Fprintf(os.Stderr, "localcluster: exec %s: %v\n", target, err)
	os.Exit(127)
}

// writeExecWrapper writes an executable script at path that runs target with
// the parent-death signal set, through the init hook of this binary.
func writeExecWrapper(path, target string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the running executable for the %s wrapper: %w", filepath.Base(target), err)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=%s %s=%d exec %s \"$@\"\n",
		execTargetEnv, shellQuote(target), execParentEnv, os.Getpid(), shellQuote(self))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return fmt.Errorf("writing the %s wrapper: %w", filepath.Base(target), err)
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// launcher runs functions that fork children on one locked OS thread; see the
// comment at the top of this file for why.
type launcher struct {
	work chan func()
	once sync.Once
}

func newLauncher() *launcher {
	l := &launcher{work: make(chan func())}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when the channel closes this goroutine returns and Go
		// ends the thread, which SIGKILLs any child still alive.
		for f := range l.work {
			f()
		}
	}()
	return l
}

// do runs f on the launcher thread and waits for it.
func (l *launcher) do(f func()) {
	done := make(chan struct{})
	l.work <- func() {
		defer close(done)
		f()
	}
	<-done
}

// close ends the launcher thread. Children still running die with it.
func (l *launcher) close() {
	l.once.Do(func() { close(l.work) })
}

// process is one child started by this package (not by envtest).
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	exitErr error
}

// start runs path with args on the launcher thread, output appended to logPath.
func (l *launcher) start(name, path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	l.do(func() { err = cmd.Start() })
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.exitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.exitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
}

// stopControlPlane stops envtest's etcd and kube-apiserver. envtest sends
// SIGTERM, and SIGKILL once its stop timeout passes, then reports the
// timeout as an error. For a throwaway server that is not a failure: the
// process is gone and its data is removed next. kube-apiserver's own
// graceful shutdown may outlast any timeout a test would wait for (it
// drains connections for up to its request timeout, a minute, while
// controllers elsewhere still watch it), so only other errors are
// returned.
func stopControlPlane(env *envtest.Environment) error {
	return withoutStopTimeouts(env.Stop())
}

// withoutStopTimeouts drops envtest's "timeout waiting for process" errors
// from err, keeping every other.
func withoutStopTimeouts(err error) error {
	var kept []error
	for _, err := range splitErrors(err) {
		if !strings.HasPrefix(err.Error(), "timeout waiting for process ") {
			kept = append(kept, err)
		}
	}
	return errors.Join(kept...)
}

// splitErrors returns the errors an aggregate or joined error holds, or err
// alone.
func splitErrors(err error) []error {
	if err == nil {
		return nil
	}
	if many, ok := err.(interface{ Unwrap() []error }); ok {
		return many.Unwrap()
	}
	if agg, ok := err.(interface{ Errors() []error }); ok {
		return agg.Errors()
	}
	return []error{err}
}

package installed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Running is the manager running as a process.
type Running struct {
	// Pid is the process's id.
	Pid int
	// LogPath holds what it wrote to standard output and error.
	LogPath string
	// ProbeAddress serves /healthz and /readyz.
	ProbeAddress string

	readyPath string
	grace     time.Duration
	exited    chan struct{}
	err       error
	kill      func() error
	stop      func() error
}

// Start runs the manager as p says, its output in logPath, and returns once
// its readiness probe answers (the Deployment's readinessProbe path), or
// with an error naming the log when it does not within a minute. A free
// loopback port is taken for the probes unless p sets one.
func (in *Install) Start(ctx context.Context, p Process, logPath string) (*Running, error) {
	if p.ProbeAddress == "" {
		addr, err := FreeAddress()
		if err != nil {
			return nil, err
		}
		p.ProbeAddress = addr
	}
	cmd, err := in.Command(p)
	if err != nil {
		return nil, err
	}
	path, err := in.readinessPath()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the manager %s: %w", p.Binary, err)
	}
	r := &Running{
		Pid: cmd.Process.Pid, LogPath: logPath, ProbeAddress: p.ProbeAddress, readyPath: path,
		grace:  in.gracePeriod(),
		exited: make(chan struct{}),
		kill:   cmd.Process.Kill,
		stop:   func() error { return cmd.Process.Signal(syscall.SIGTERM) },
	}
	go func() {
		r.err = cmd.Wait()
		_ = logFile.Close()
		close(r.exited)
	}()
	if err := r.waitReady(ctx); err != nil {
		_ = r.Kill()
		return nil, fmt.Errorf("%w (its log: %s)", err, logPath)
	}
	return r, nil
}

// readinessPath is the path of the manager container's readiness probe.
func (in *Install) readinessPath() (string, error) {
	c, err := in.Manager()
	if err != nil {
		return "", err
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		return "", fmt.Errorf("%s: the manager container has no HTTP readiness probe", InstallPath)
	}
	return c.ReadinessProbe.HTTPGet.Path, nil
}

// gracePeriod is how long the kubelet would wait after SIGTERM.
func (in *Install) gracePeriod() time.Duration {
	if s := in.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

// Exited is closed once the process has exited; Err then says how.
func (r *Running) Exited() <-chan struct{} { return r.exited }

// Err is how the process exited (nil while it runs or after a clean exit).
func (r *Running) Err() error {
	select {
	case <-r.exited:
		return r.err
	default:
		return nil
	}
}

// Stop stops the manager as the kubelet stops a pod: SIGTERM, then SIGKILL
// after the Deployment's termination grace period.
func (r *Running) Stop() error {
	select {
	case <-r.exited:
		return nil
	default:
	}
	if err := r.stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-r.exited:
		return nil
	case <-time.After(r.grace):
		return errors.Join(fmt.Errorf("the manager did not stop within its grace period (%s); killed", r.grace), r.Kill())
	}
}

// Kill kills the manager at once, as a node that dies would, and waits
// until it is gone.
func (r *Running) Kill() error {
	if err := r.kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-r.exited
	return nil
}

func (r *Running) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := "http://" + r.ProbeAddress + r.readyPath
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("the manager exited before it was ready: %w", r.err)
		case <-ctx.Done():
			return fmt.Errorf("the manager was not ready a minute after it started: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FreeAddress returns a loopback address with a port nobody listens on.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

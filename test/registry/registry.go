// Package registry runs a real OCI registry for tests: CNCF Distribution
// (the registry Docker Hub and most private registries are built on), the
// released version below built from the Go module proxy like the other
// binaries the tests run, as a process of the test with its storage in a
// directory, with or without a user and password.
package registry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/move-operator/move-operator/test/gomodule"
)

// Version is the CNCF Distribution release the tests run.
const Version = "v3.1.2"

const pkg = "github.com/distribution/distribution/v3/cmd/registry"

// Binary returns the registry's binary, built the first time on a machine.
func Binary(ctx context.Context) (string, error) {
	return gomodule.Install(ctx, pkg, Version, "distribution-registry")
}

// Options says how a registry runs.
type Options struct {
	// User and Password, when set, are the one account the registry takes
	// (htpasswd); every request without them is refused.
	User, Password string
}

// Registry is a running registry.
type Registry struct {
	// Host is host:port, plain HTTP on the loopback address.
	Host string
	dir  string
	cmd  *exec.Cmd
	// exited is closed when the process has exited, with exitErr set.
	exited  chan struct{}
	exitErr error
	stop    sync.Once
}

// Start runs a registry with its storage, configuration and log in dir
// (dir/registry.log), and waits until it answers.
func Start(ctx context.Context, dir string, opts Options) (*Registry, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, exited: make(chan struct{})}
	config, err := r.writeConfig(opts)
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(bin, "serve", config)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	// The parent-death signal is sent when the thread that started the
	// process ends: that thread is kept until the process exits.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := r.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		r.exitErr = r.cmd.Wait()
		log.Close() //nolint:errcheck // the registry's own log
		close(r.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting the registry: %w", err)
	}
	if err := r.waitReady(ctx); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

func (r *Registry) writeConfig(opts Options) (string, error) {
	auth := ""
	if opts.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return "", err
		}
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.User+":"+string(hash)+"\n"), 0o600); err != nil {
			return "", err
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: move-operator-tests\n    path: %s\n", htpasswd)
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: move-operator-tests
%s`, filepath.Join(r.dir, "storage"), r.Host, auth)
	path := filepath.Join(r.dir, "config.yml")
	return path, os.WriteFile(path, []byte(config), 0o600)
}

func (r *Registry) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close() //nolint:errcheck // a probe
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("the registry exited before it answered (%v); see %s", r.exitErr, filepath.Join(r.dir, "registry.log"))
		case <-ctx.Done():
			return fmt.Errorf("the registry did not answer on %s in 30s; see %s", r.Host, filepath.Join(r.dir, "registry.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop kills the registry at once, as a registry that goes away does, and
// waits for it to exit. Its storage stays.
func (r *Registry) Stop() {
	r.stop.Do(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close() //nolint:errcheck // only its port was wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}

package gomodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
)

// Released binaries (cluster-api-operator, a registry) are built with
// `go install pkg@version`, outside this module: with the dependencies their
// own go.mod pins, as their release images are built, and without go.sum
// entries here for dependencies nothing in this module uses (go mod tidy
// would drop them). They are cached outside the work tree, beside the
// Kubernetes binaries hack/kube-binaries.sh builds: $MOVE_OPERATOR_CACHE, or
// move-operator under the user's cache directory.

var installs sync.Map // "pkg@version" -> *install

type install struct {
	once sync.Once
	path string
	err  error
}

// Install returns the path of the binary, called name, of the main package
// pkg at version, building it the first time on a machine (minutes on 2
// cores), once per process however many tests ask.
func Install(ctx context.Context, pkg, version, name string) (string, error) {
	v, _ := installs.LoadOrStore(pkg+"@"+version, &install{})
	in := v.(*install)
	in.once.Do(func() { in.path, in.err = build(ctx, pkg, version, name) })
	return in.path, in.err
}

// CacheDir is where built binaries are kept.
func CacheDir() (string, error) {
	root := os.Getenv("MOVE_OPERATOR_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("finding a cache directory for built binaries: %w", err)
		}
		root = filepath.Join(cache, "move-operator")
	}
	return filepath.Join(root, "bin"), nil
}

func build(ctx context.Context, pkg, version, name string) (string, error) {
	root, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, name+"-"+version)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Test processes of several packages may ask at once (go test runs
	// packages in parallel): one builds, the others wait for it and take
	// its binary, instead of sharing two cores among identical builds.
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// GOBIN is a directory of this build's own, so that two test processes
	// building at once never rename a half-written binary into place.
	gobin, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(gobin) }()
	cmd := exec.CommandContext(ctx, "go", "install", pkg+"@"+version)
	// Outside any module: the project's go.mod is neither read nor touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, out)
		}
		return "", fmt.Errorf("building %s@%s: %w", pkg, version, err)
	}
	// go install names the binary after the package's last element.
	if err := os.Rename(filepath.Join(gobin, path.Base(pkg)), bin); err != nil {
		return "", fmt.Errorf("caching the %s binary: %w", name, err)
	}
	return bin, nil
}

// lockDir takes an exclusive lock on dir shared with other processes,
// waiting for it; the returned function lets it go.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

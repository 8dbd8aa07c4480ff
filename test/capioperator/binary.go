package capioperator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// The released binary, not one built in this module: cluster-api-operator's
// main package imports its own internal packages, which no other module may
// import, and building its main inside this module would need go.sum
// entries for dependencies nothing here uses (go mod tidy drops them).
// `go install module/cmd@version` builds it with the dependencies its own
// go.mod pins, as its release image is built.

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the cluster-api-operator manager binary of the
// version go.mod pins, building it the first time (about 1.5 minutes cold
// on 2 cores) into a cache outside the work tree, shared with
// hack/kube-binaries.sh: $MOVE_OPERATOR_CACHE, or move-operator under the
// user's cache directory.
func Binary(ctx context.Context) (string, error) {
	binary.once.Do(func() { binary.path, binary.err = buildBinary(ctx) })
	return binary.path, binary.err
}

func buildBinary(ctx context.Context) (string, error) {
	_, version, err := ModuleDir(ctx)
	if err != nil {
		return "", err
	}
	root := os.Getenv("MOVE_OPERATOR_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("finding a cache directory for cluster-api-operator: %w", err)
		}
		root = filepath.Join(cache, "move-operator")
	}
	dir := filepath.Join(root, "bin", "cluster-api-operator-"+version)
	path := filepath.Join(dir, "cluster-api-operator")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// GOBIN is a directory of this build's own, so that two test processes
	// building at once never rename a half-written binary into place.
	gobin, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(gobin) }()
	cmd := exec.CommandContext(ctx, "go", "install", modulePath+"/cmd@"+version)
	// Outside any module: the project's go.mod is neither read nor touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, out)
		}
		return "", fmt.Errorf("building cluster-api-operator %s: %w", version, err)
	}
	if err := os.Rename(filepath.Join(gobin, "cmd"), path); err != nil {
		return "", fmt.Errorf("caching the cluster-api-operator binary: %w", err)
	}
	return path, nil
}

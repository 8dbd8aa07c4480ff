package capiprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"

	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
)

const capiModulePath = "sigs.k8s.io/cluster-api"

// capiAnchorFile is where capiAnchor is defined, relative to the module root.
const capiAnchorFile = "core/webhooks/admission/cluster.go"

// capiAnchor is a function of the cluster-api module compiled into this
// binary: its source location names the module version, and usually its
// directory (test binaries carry no module dependency list to ask instead).
var capiAnchor = (*coreadmission.Cluster).SetupWebhookWithManager

var capiModule struct {
	once    sync.Once
	dir     string
	version string
	err     error
}

// capiModuleDir returns the source directory and version of the
// sigs.k8s.io/cluster-api module this binary is built with, so the manifests
// installed always match the webhook code served.
func capiModuleDir(ctx context.Context) (dir, version string, err error) {
	capiModule.once.Do(func() {
		capiModule.dir, capiModule.version, capiModule.err = findCAPIModule(ctx)
	})
	return capiModule.dir, capiModule.version, capiModule.err
}

func findCAPIModule(ctx context.Context) (string, string, error) {
	fn := runtime.FuncForPC(reflect.ValueOf(capiAnchor).Pointer())
	if fn == nil {
		return "", "", errors.New("finding the cluster-api module: no symbol information")
	}
	file, _ := fn.FileLine(fn.Entry())
	file = filepath.ToSlash(file)
	marker := capiModulePath + "@"
	i := strings.LastIndex(file, marker)
	if i < 0 {
		return "", "", fmt.Errorf("finding the cluster-api module: %s is not in a module cache path", file)
	}
	rest := file[i+len(marker):]
	version, _, _ := strings.Cut(rest, "/")
	root := strings.TrimSuffix(file, "/"+capiAnchorFile)
	if filepath.IsAbs(root) {
		if _, err := os.Stat(filepath.Join(root, capiAnchorFile)); err == nil {
			return root, version, nil
		}
	}
	// Built with -trimpath: ask the go command where the module cache keeps it.
	dir, err := downloadModule(ctx, capiModulePath, version)
	return dir, version, err
}

func downloadModule(ctx context.Context, path, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	// Outside any module, so the project's go.mod is neither read nor touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, exitErr.Stderr)
		}
		return "", fmt.Errorf("locating %s@%s in the module cache: %w", path, version, err)
	}
	var mod struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("parsing go mod download output for %s@%s: %w", path, version, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("locating %s@%s in the module cache: %s", path, version, mod.Error)
	}
	return mod.Dir, nil
}

// Package gomodule finds the source of Go modules for tests: the version of
// a module compiled into the running binary, and the directory of any module
// version in the module cache, so that tests install the manifests (CRDs,
// webhook configurations) of exactly the versions go.mod pins.
package gomodule

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
)

// Dir returns the source directory and version of the module at path,
// located through anchor, a function of that module compiled into this
// binary and defined in anchorFile (relative to the module root): its
// source location names the module's version, and usually its directory
// (test binaries carry no module dependency list to ask instead). A binary
// built with -trimpath names no directory; the go command is asked then.
func Dir(ctx context.Context, path string, anchor any, anchorFile string) (string, string, error) {
	fn := runtime.FuncForPC(reflect.ValueOf(anchor).Pointer())
	if fn == nil {
		return "", "", fmt.Errorf("finding the %s module: no symbol information", path)
	}
	file, _ := fn.FileLine(fn.Entry())
	file = filepath.ToSlash(file)
	marker := path + "@"
	i := strings.LastIndex(file, marker)
	if i < 0 {
		return "", "", fmt.Errorf("finding the %s module: %s is not in a module cache path", path, file)
	}
	version, _, _ := strings.Cut(file[i+len(marker):], "/")
	root := strings.TrimSuffix(file, "/"+anchorFile)
	if filepath.IsAbs(root) {
		if _, err := os.Stat(filepath.Join(root, anchorFile)); err == nil {
			return root, version, nil
		}
	}
	dir, err := Download(ctx, path, version)
	return dir, version, err
}

// Download returns the directory of path@version in the module cache,
// downloading it from the module proxy when it is not there.
func Download(ctx context.Context, path, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	// Outside any module, so the project's go.mod is neither read nor touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("locating %s@%s in the module cache: %s", path, version, mod.Error)
	}
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, exitErr.Stderr)
		}
		return "", fmt.Errorf("locating %s@%s in the module cache: %w", path, version, err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("locating %s@%s in the module cache: the go command named no directory", path, version)
	}
	return mod.Dir, nil
}

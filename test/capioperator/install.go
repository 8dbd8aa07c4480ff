package capioperator

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

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	operatorv1 "sigs.k8s.io/cluster-api-operator/api/v1alpha2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const modulePath = "sigs.k8s.io/cluster-api-operator"

// anchorFile is where anchor is defined, relative to the module root.
const anchorFile = "api/v1alpha2/coreprovider_wrapper.go"

// anchor is a function of the pinned cluster-api-operator module compiled
// into this binary: its source location names the module's version and
// directory, so the CRDs installed are those of the version go.mod pins.
var anchor = (*operatorv1.CoreProvider).ProviderName

// GroupVersion is the API version of the provider objects the CRDs store.
var GroupVersion = operatorv1.GroupVersion

var module struct {
	once     sync.Once
	dir, ver string
	err      error
}

// ModuleDir returns the source directory and version of the pinned
// sigs.k8s.io/cluster-api-operator module.
func ModuleDir(ctx context.Context) (dir, version string, err error) {
	module.once.Do(func() { module.dir, module.ver, module.err = findModule(ctx) })
	return module.dir, module.ver, module.err
}

func findModule(ctx context.Context) (string, string, error) {
	fn := runtime.FuncForPC(reflect.ValueOf(anchor).Pointer())
	if fn == nil {
		return "", "", errors.New("finding the cluster-api-operator module: no symbol information")
	}
	file, _ := fn.FileLine(fn.Entry())
	file = filepath.ToSlash(file)
	marker := modulePath + "@"
	i := strings.LastIndex(file, marker)
	if i < 0 {
		return "", "", fmt.Errorf("finding the cluster-api-operator module: %s is not in a module cache path", file)
	}
	version, _, _ := strings.Cut(file[i+len(marker):], "/")
	root := strings.TrimSuffix(file, "/"+anchorFile)
	if filepath.IsAbs(root) {
		if _, err := os.Stat(filepath.Join(root, anchorFile)); err == nil {
			return root, version, nil
		}
	}
	// Built with -trimpath: ask the go command where the module cache keeps it.
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", modulePath+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: the project's go.mod stays untouched
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("locating %s@%s in the module cache: %w", modulePath, version, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", "", fmt.Errorf("locating %s@%s in the module cache: %w %s", modulePath, version, err, mod.Error)
	}
	return mod.Dir, version, nil
}

// InstallCRDs installs cluster-api-operator's provider CRDs, as its module
// ships them in config/crd/bases, and waits until they are served. It is
// idempotent.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	dir, version, err := ModuleDir(ctx)
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the CRDs of cluster-api-operator %s: %w", version, err)
	}
	return nil
}

// Kinds are cluster-api-operator's provider kinds.
var Kinds = []string{
	"CoreProvider", "BootstrapProvider", "ControlPlaneProvider", "InfrastructureProvider",
	"IPAMProvider", "AddonProvider", "RuntimeExtensionProvider",
}

// GVK returns the GroupVersionKind of a provider kind.
func GVK(kind string) schema.GroupVersionKind { return GroupVersion.WithKind(kind) }

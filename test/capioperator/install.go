package capioperator

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	operatorv1 "sigs.k8s.io/cluster-api-operator/api/v1alpha2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/move-operator/move-operator/test/gomodule"
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
	return gomodule.Dir(ctx, modulePath, anchor, anchorFile)
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

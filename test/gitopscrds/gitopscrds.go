// Package gitopscrds installs in a test cluster the CRDs of the GitOps
// managers a move suspends: Flux's Kustomization and HelmRelease and Argo
// CD's Application, as their projects publish them, from their Go modules at
// pinned versions (read through the module cache, so a second run needs no
// network). It installs no controller: a test plays the GitOps tool's part,
// and asserts what the operator did to the managers' specs.
package gitopscrds

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/move-operator/move-operator/test/gomodule"
)

// A pinned module and the CRD files in it.
type module struct {
	path, version string
	files         []string
}

// The modules the CRDs come from. Each is the newest release whose go.mod
// this repository's toolchain accepts; a newer one needs only its version
// changed here.
var modules = []module{
	{path: "github.com/fluxcd/kustomize-controller", version: "v1.9.6",
		files: []string{"config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"}},
	{path: "github.com/fluxcd/helm-controller", version: "v1.4.3",
		files: []string{"config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml"}},
	{path: "github.com/argoproj/argo-cd/v3", version: "v3.5.7",
		files: []string{"manifests/crds/application-crd.yaml"}},
}

var located struct {
	once  sync.Once
	files []string
	err   error
}

// Files returns the paths of the CRD files, downloading their modules into
// the module cache the first time.
func Files(ctx context.Context) ([]string, error) {
	located.once.Do(func() {
		for _, m := range modules {
			dir, err := gomodule.Download(ctx, m.path, m.version)
			if err != nil {
				located.err = err
				return
			}
			for _, f := range m.files {
				located.files = append(located.files, filepath.Join(dir, filepath.FromSlash(f)))
			}
		}
	})
	return located.files, located.err
}

// Install installs the CRDs in a cluster and waits until they are served.
func Install(ctx context.Context, cfg *rest.Config) error {
	files, err := Files(ctx)
	if err != nil {
		return err
	}
	// envtest waits 10 seconds by default for the CRDs to be served; Argo
	// CD's Application CRD alone is 400 kB, and a loaded machine takes
	// longer than that to compile its schema.
	opts := envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute, PollInterval: 200 * time.Millisecond}
	if _, err := envtest.InstallCRDs(cfg, opts); err != nil {
		return fmt.Errorf("installing the Flux and Argo CD CRDs: %w", err)
	}
	return nil
}

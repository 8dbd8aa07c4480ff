package capiprovider

import (
	"context"
	"sync"

	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"

	"github.com/move-operator/move-operator/test/gomodule"
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
	return gomodule.Dir(ctx, capiModulePath, capiAnchor, capiAnchorFile)
}

package capirelease

import (
	"context"
	"fmt"
	"time"

	"github.com/move-operator/move-operator/test/gomodule"
)

// Version is the Cluster API release this package installs: v1.10.9, the
// last patch of the last line whose API is the v1beta1 contract.
const Version = "v1.10.9"

// modulePath is the module of Cluster API's core, kubeadm bootstrap and
// kubeadm control plane managers: one module, three main packages.
const modulePath = "sigs.k8s.io/cluster-api"

// manager says where a provider's main package is and what its binary is
// called in the cache.
type manager struct {
	pkg, binary string
}

var (
	coreManager                = manager{modulePath, "capi-manager"}
	kubeadmBootstrapManager    = manager{modulePath + "/bootstrap/kubeadm", "capi-kubeadm-bootstrap-manager"}
	kubeadmControlPlaneManager = manager{modulePath + "/controlplane/kubeadm", "capi-kubeadm-control-plane-manager"}
)

// Binaries builds, once per machine, the released manager binaries of the
// core, kubeadm bootstrap and kubeadm control plane providers at Version,
// and returns their paths keyed by provider name (CoreProvider etc.) and
// how long finding or building them took. They are built by go install
// outside this module, with the dependencies Cluster API's own go.mod pins
// (controller-runtime v0.20, Kubernetes libraries v0.32), as its release
// images are, and cached beside the Kubernetes binaries (gomodule.CacheDir).
// Cold, the first takes about 3 minutes on 2 cores and the other two reuse
// most of its compiled packages; cached, a stat each.
func Binaries(ctx context.Context) (map[string]string, time.Duration, error) {
	began := time.Now()
	out := map[string]string{}
	// One after the other: the second and third reuse the build cache the
	// first filled, and two cores have no room for parallel links.
	for _, p := range providerSpecs {
		path, err := gomodule.Install(ctx, p.manager.pkg, Version, p.manager.binary)
		if err != nil {
			return nil, 0, fmt.Errorf("building the %s manager of Cluster API %s: %w", p.name, Version, err)
		}
		out[p.name] = path
	}
	return out, time.Since(began), nil
}

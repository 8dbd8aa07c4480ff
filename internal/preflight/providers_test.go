package preflight_test

import (
	"errors"
	"testing"

	"github.com/move-operator/move-operator/internal/preflight"
)

func op(typ, name, version string) preflight.Provider {
	return preflight.Provider{Type: typ, Name: name, Version: version, Inventory: preflight.OperatorInventory}
}

func TestProvidersCompareAsClusterctlMoveComparesItsInventories(t *testing.T) {
	source := []preflight.Provider{
		op("CoreProvider", "cluster-api", "v1.14.2"),
		op("BootstrapProvider", "kubeadm", "v1.14.2"),
		op("InfrastructureProvider", "loop", "v0.1.0"),
	}
	for _, tc := range []struct {
		name   string
		source []preflight.Provider
		target []preflight.Provider
		// problems are the exact problems reported, sorted; none means the check passes.
		problems []string
	}{{
		name:   "the same providers at the same versions pass",
		target: source,
	}, {
		name:   "a target with newer versions passes, as clusterctl move lets it",
		target: []preflight.Provider{op("CoreProvider", "cluster-api", "v1.15.0"), op("BootstrapProvider", "kubeadm", "v1.14.3"), op("InfrastructureProvider", "loop", "v0.1.0")},
	}, {
		name: "the newest of several instances in the target counts",
		target: []preflight.Provider{op("CoreProvider", "cluster-api", "v1.14.2"), op("BootstrapProvider", "kubeadm", "v1.14.2"),
			op("InfrastructureProvider", "loop", "v0.0.9"), op("InfrastructureProvider", "loop", "v0.2.0")},
	}, {
		name:     "a provider the target lacks is named",
		target:   []preflight.Provider{op("CoreProvider", "cluster-api", "v1.14.2"), op("BootstrapProvider", "kubeadm", "v1.14.2")},
		problems: []string{"InfrastructureProvider loop (v0.1.0 in the source) is not installed in the target"},
	}, {
		name:     "an older provider in the target is named with both versions",
		target:   []preflight.Provider{op("CoreProvider", "cluster-api", "v1.13.9"), op("BootstrapProvider", "kubeadm", "v1.14.2"), op("InfrastructureProvider", "loop", "v0.1.0")},
		problems: []string{"CoreProvider cluster-api is older in the target (v1.13.9) than in the source (v1.14.2)"},
	}, {
		name:     "a provider of the same name and another type is another provider",
		target:   []preflight.Provider{op("CoreProvider", "cluster-api", "v1.14.2"), op("ControlPlaneProvider", "kubeadm", "v1.14.2"), op("InfrastructureProvider", "loop", "v0.1.0")},
		problems: []string{"BootstrapProvider kubeadm (v1.14.2 in the source) is not installed in the target"},
	}, {
		name:     "a target provider cluster-api-operator has not finished installing does not count",
		target:   []preflight.Provider{op("CoreProvider", "cluster-api", "v1.14.2"), op("BootstrapProvider", "kubeadm", "v1.14.2"), op("InfrastructureProvider", "loop", "")},
		problems: []string{"InfrastructureProvider loop in the target: no status.installedVersion: cluster-api-operator has not finished installing it"},
	}, {
		name:     "a source provider without a version cannot be compared",
		source:   []preflight.Provider{op("CoreProvider", "cluster-api", "")},
		target:   source,
		problems: []string{"CoreProvider cluster-api in the source: no status.installedVersion: cluster-api-operator has not finished installing it"},
	}, {
		name:     "a version that is not semantic is named",
		source:   []preflight.Provider{{Type: "CoreProvider", Name: "cluster-api", Version: "latest", Inventory: preflight.ClusterctlInventory}},
		target:   source,
		problems: []string{`CoreProvider cluster-api in the source: version "latest" in the clusterctl inventory is not a semantic version`},
	}, {
		name: "a source installed by clusterctl compares with a target installed by cluster-api-operator",
		source: []preflight.Provider{
			{Type: "CoreProvider", Name: "cluster-api", Version: "v1.14.2", Inventory: preflight.ClusterctlInventory},
		},
		target: source,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.source
			if src == nil {
				src = source
			}
			err := preflight.CompareProviders(src, tc.target)
			if len(tc.problems) == 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			var mismatch *preflight.ProviderMismatch
			if !errors.As(err, &mismatch) {
				t.Fatalf("want a *ProviderMismatch, got %v", err)
			}
			if len(mismatch.Problems) != len(tc.problems) {
				t.Fatalf("problems:\n got %q\nwant %q", mismatch.Problems, tc.problems)
			}
			for i := range tc.problems {
				if mismatch.Problems[i] != tc.problems[i] {
					t.Errorf("problem %d:\n got %q\nwant %q", i, mismatch.Problems[i], tc.problems[i])
				}
			}
		})
	}
}

package preflight_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/move-operator/move-operator/internal/graph"
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
			err := preflight.CompareProviders(src, tc.target, nil)
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

// ofProvider is t as the provider of clusterctl manifest label provider
// installs it (graph.ProviderLabel on its CRD).
func ofProvider(provider string, t graph.Type) graph.Type {
	t.Provider = provider
	return t
}

// clusterAPIKinds are kinds of Cluster API's own providers, and one of the
// loop infrastructure provider, labelled as clusterctl labels their CRDs;
// each stored at the version versions gives its group (MachineDrainRule:
// its kind), v otherwise.
func clusterAPIKinds(v string, versions map[string]string) []graph.Type {
	at := func(group string) string {
		if versions[group] != "" {
			return versions[group]
		}
		return v
	}
	return []graph.Type{
		ofProvider("cluster-api", kind(core, "Cluster", "clusters", at(core))),
		ofProvider("cluster-api", kind(core, "Machine", "machines", at(core))),
		ofProvider("cluster-api", kind(core, "MachineDrainRule", "machinedrainrules", at("MachineDrainRule"))),
		ofProvider("cluster-api", kind("runtime.cluster.x-k8s.io", "ExtensionConfig", "extensionconfigs", at("runtime.cluster.x-k8s.io"))),
		ofProvider("bootstrap-kubeadm", kind("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", at("bootstrap.cluster.x-k8s.io"))),
		ofProvider("control-plane-kubeadm", kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", at(kubeadm))),
		ofProvider("infrastructure-loop", kind(infra, "LoopMachine", "loopmachines", "v1alpha2")),
	}
}

func TestAnOlderClusterAPIInTheTargetPassesOnlyWhenTheMoveConvertsItsKindsBack(t *testing.T) {
	ccl := func(typ, name, version string) preflight.Provider {
		return preflight.Provider{Type: typ, Name: name, Version: version, Inventory: preflight.ClusterctlInventory}
	}
	// clusterAPI is Cluster API's three providers at version v, and the
	// loop infrastructure provider at loop.
	clusterAPI := func(v, loop string) []preflight.Provider {
		return []preflight.Provider{
			ccl("CoreProvider", "cluster-api", v), ccl("BootstrapProvider", "kubeadm", v), ccl("ControlPlaneProvider", "kubeadm", v),
			ccl("InfrastructureProvider", "loop", loop),
		}
	}
	source := clusterAPI("v1.14.2", "v0.1.0")
	v1beta2 := clusterAPIKinds("v1beta2", nil)
	// v110 stores the kinds as Cluster API v1.10 does: at v1beta1,
	// ExtensionConfig at v1alpha1.
	v110 := clusterAPIKinds("v1beta1", map[string]string{"runtime.cluster.x-k8s.io": "v1alpha1"})
	for _, tc := range []struct {
		name string
		// source is the source's providers; Cluster API v1.14.2's and
		// loop v0.1.0 when nil.
		source, target           []preflight.Provider
		sourceKinds, targetKinds []graph.Type
		// problems are the problems reported, each by what it must say,
		// sorted; none means the check passes.
		problems [][]string
	}{{
		name:        "Cluster API v1.10 in the target passes when every kind of its providers goes back to v1beta1",
		target:      clusterAPI("v1.10.9", "v0.1.0"),
		sourceKinds: v1beta2, targetKinds: v110,
	}, {
		name:        "one of Cluster API's providers alone may be older",
		target:      append(clusterAPI("v1.14.2", "v0.1.0"), ccl("BootstrapProvider", "kubeadm", "v1.10.9")),
		sourceKinds: v1beta2, targetKinds: clusterAPIKinds("v1beta2", map[string]string{"bootstrap.cluster.x-k8s.io": "v1beta1"}),
	}, {
		name:        "an older infrastructure provider is refused as clusterctl refuses it, though Cluster API goes back",
		target:      clusterAPI("v1.10.9", "v0.0.9"),
		sourceKinds: v1beta2, targetKinds: v110,
		problems: [][]string{{"InfrastructureProvider loop is older in the target (v0.0.9) than in the source (v0.1.0)"}},
	}, {
		name:        "an older patch release of the same contract is refused: nothing converts, and its controllers may not know the newer fields",
		target:      clusterAPI("v1.14.0", "v0.1.0"),
		sourceKinds: v1beta2, targetKinds: v1beta2,
		problems: [][]string{
			{"BootstrapProvider kubeadm is older in the target (v1.14.0) than in the source (v1.14.2)",
				"it does not convert KubeadmConfig.bootstrap.cluster.x-k8s.io, stored at one version"},
			{"ControlPlaneProvider kubeadm is older in the target (v1.14.0) than in the source (v1.14.2): Cluster API's own providers may be older in the target only when the move converts each of their kinds back",
				"it does not convert KubeadmControlPlane.controlplane.cluster.x-k8s.io, stored at one version in both clusters"},
			{"CoreProvider cluster-api is older in the target (v1.14.0) than in the source (v1.14.2)",
				"it does not convert Cluster.cluster.x-k8s.io, ExtensionConfig.runtime.cluster.x-k8s.io, Machine.cluster.x-k8s.io, and 1 more kinds, stored at one version in both clusters",
				"may not know the fields a newer one writes"},
		},
	}, {
		name:        "one kind of a provider stored at one version in both keeps the older provider refused, naming that kind alone",
		target:      clusterAPI("v1.10.9", "v0.1.0"),
		sourceKinds: clusterAPIKinds("v1beta2", map[string]string{"MachineDrainRule": "v1beta1"}),
		targetKinds: clusterAPIKinds("v1beta1", map[string]string{"runtime.cluster.x-k8s.io": "v1alpha1"}),
		problems: [][]string{{"CoreProvider cluster-api is older in the target (v1.10.9) than in the source (v1.14.2)",
			"and it does not convert MachineDrainRule.cluster.x-k8s.io, stored at one version in both clusters"}},
	}, {
		name:        "a kind of the provider the target cannot take keeps it refused, naming the kind and why",
		target:      clusterAPI("v1.10.9", "v0.1.0"),
		sourceKinds: v1beta2,
		targetKinds: clusterAPIKinds("v1beta1", map[string]string{"runtime.cluster.x-k8s.io": "v1alpha0"}),
		problems: [][]string{{"CoreProvider cluster-api is older in the target (v1.10.9) than in the source (v1.14.2)",
			"and ExtensionConfig.runtime.cluster.x-k8s.io cannot go across at all (OlderInTarget)"}},
	}, {
		name:   "a provider whose kinds are not labelled for it is refused: nothing shows they go back",
		target: clusterAPI("v1.10.9", "v0.1.0"),
		sourceKinds: []graph.Type{kind(core, "Cluster", "clusters", "v1beta2"),
			ofProvider("bootstrap-kubeadm", kind("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", "v1beta2")),
			ofProvider("control-plane-kubeadm", kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2"))},
		targetKinds: []graph.Type{kind(core, "Cluster", "clusters", "v1beta1"),
			kind("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", "v1beta1"),
			kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1")},
		problems: [][]string{{"CoreProvider cluster-api is older in the target (v1.10.9) than in the source (v1.14.2)",
			"and the source has no kind labelled cluster.x-k8s.io/provider=cluster-api"}},
	}, {
		name:        "a provider of Cluster API's name and another type is not Cluster API's",
		source:      []preflight.Provider{ccl("InfrastructureProvider", "cluster-api", "v1.14.2")},
		target:      []preflight.Provider{ccl("InfrastructureProvider", "cluster-api", "v1.10.9")},
		sourceKinds: v1beta2, targetKinds: v110,
		problems: [][]string{{"InfrastructureProvider cluster-api is older in the target (v1.10.9) than in the source (v1.14.2)"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.source
			if src == nil {
				src = source
			}
			kvs := preflight.KindVersions(types(tc.sourceKinds...), types(tc.targetKinds...))
			err := preflight.CompareProviders(src, tc.target, preflight.OlderClusterAPI(kvs))
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
				t.Fatalf("problems:\n got %q\nwant them to say %q", mismatch.Problems, tc.problems)
			}
			for i, says := range tc.problems {
				for _, s := range says {
					if !strings.Contains(mismatch.Problems[i], s) {
						t.Errorf("problem %d does not say %q:\n%s", i, s, mismatch.Problems[i])
					}
				}
			}
			if len(tc.problems) == 1 && len(tc.problems[0]) == 1 && mismatch.Problems[0] != tc.problems[0][0] {
				t.Errorf("a provider clusterctl's rule refuses is named as it always was:\n got %q\nwant %q", mismatch.Problems[0], tc.problems[0][0])
			}
		})
	}
}

package preflight_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
)

// kind is a type stored at version, with storedVersions as given (the
// storage version alone when none).
func kind(group, k, resource, version string, storedVersions ...string) graph.Type {
	if len(storedVersions) == 0 {
		storedVersions = []string{version}
	}
	return graph.Type{
		GVK:            schema.GroupVersionKind{Group: group, Version: version, Kind: k},
		Resource:       resource,
		Namespaced:     true,
		StoredVersions: storedVersions,
	}
}

func types(ts ...graph.Type) *graph.Types {
	return graph.NewTypes(append(graph.CoreTypes(), ts...)...)
}

const (
	core    = "cluster.x-k8s.io"
	kubeadm = "controlplane.cluster.x-k8s.io"
	infra   = "infrastructure.cluster.x-k8s.io"
)

func TestKindVersions(t *testing.T) {
	tests := []struct {
		name           string
		source, target *graph.Types
		// want is, per kind, "source>target conversion refusal".
		want map[string]string
		// says are what the message of each kind must say.
		says map[string][]string
	}{
		{
			name:   "kinds stored at one version in both clusters need nothing",
			source: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerCluster", "dockerclusters", "v1beta2")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerCluster", "dockerclusters", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta2>v1beta2 None ",
				"DockerCluster.infrastructure.cluster.x-k8s.io": "v1beta2>v1beta2 None ",
			},
		},
		{
			name: "Cluster API's kinds of a v1beta1 source convert into a v1beta2 target, in the operator",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(core, "Machine", "machines", "v1beta1"),
				kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(core, "Machine", "machines", "v1beta2"),
				kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                          "v1beta1>v1beta2 ToNewer ",
				"Machine.cluster.x-k8s.io":                          "v1beta1>v1beta2 ToNewer ",
				"KubeadmControlPlane.controlplane.cluster.x-k8s.io": "v1beta1>v1beta2 ToNewer ",
			},
			says: map[string][]string{"Cluster.cluster.x-k8s.io": {"clusters", "v1beta1", "v1beta2", "Cluster API's own code"}},
		},
		{
			name:   "a provider's kind stored at another version is refused by name: it converts only in its provider",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2"), kind(infra, "DockerMachine", "dockermachines", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta1>v1beta2 ToNewer ",
				"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>v1beta2  NewerInTarget",
			},
			says: map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {
				"dockermachines", "v1beta1", "v1beta2", "convert only in that provider", "DockerMachine.infrastructure.cluster.x-k8s.io", "upgrade the provider in the source", "install in the target the version the source runs"}},
		},
		{
			name:   "a kind the target does not serve is refused by name",
			source: types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want: map[string]string{
				"Cluster.cluster.x-k8s.io":                      "v1beta1>v1beta2 ToNewer ",
				"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>  NotInTarget",
			},
			says: map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {"dockermachines", "not served by the target", "install there the provider"}},
		},
		{
			name:   "going back to an older Cluster API converts Cluster API's kinds back, and refuses a provider's",
			source: types(kind(core, "Machine", "machines", "v1beta2"), kind(infra, "DockerMachine", "dockermachines", "v1beta2")),
			target: types(kind(core, "Machine", "machines", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			want: map[string]string{
				"Machine.cluster.x-k8s.io":                      "v1beta2>v1beta1 ToOlder ",
				"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta2>v1beta1  OlderInTarget",
			},
			says: map[string][]string{
				"Machine.cluster.x-k8s.io":                      {"older v1beta1", "converts each object back", "refuses by name any object with fields v1beta1 cannot hold"},
				"DockerMachine.infrastructure.cluster.x-k8s.io": {"only at the older v1beta1", "install in the target the provider version the source runs"},
			},
		},
		{
			name:   "a version pair Cluster API's code does not convert is refused, naming those it does",
			source: types(kind(core, "Cluster", "clusters", "v1alpha4")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want:   map[string]string{"Cluster.cluster.x-k8s.io": "v1alpha4>v1beta2  NewerInTarget"},
			says:   map[string][]string{"Cluster.cluster.x-k8s.io": {"only between v1beta1, v1beta2", "upgrade the provider in the source in place first"}},
		},
		{
			name:   "objects still stored at an older version in the source are refused, converted or not",
			source: types(kind(core, "Cluster", "clusters", "v1beta1", "v1alpha4", "v1beta1")),
			target: types(kind(core, "Cluster", "clusters", "v1beta2")),
			want:   map[string]string{"Cluster.cluster.x-k8s.io": "v1beta1>v1beta2 ToNewer StoredAtOtherVersions"},
			says:   map[string][]string{"Cluster.cluster.x-k8s.io": {"clusters in the source still has objects stored at v1alpha4", "trim status.storedVersions"}},
		},
		{
			name:   "a refused kind also says when its objects are stored at other versions",
			source: types(kind(infra, "DockerMachine", "dockermachines", "v1beta1")),
			target: types(kind(infra, "DockerMachine", "dockermachines", "v1beta2", "v1beta1", "v1beta2")),
			want:   map[string]string{"DockerMachine.infrastructure.cluster.x-k8s.io": "v1beta1>v1beta2  NewerInTarget"},
			says:   map[string][]string{"DockerMachine.infrastructure.cluster.x-k8s.io": {"convert only in that provider", "dockermachines in the target still has objects stored at v1beta1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, kv := range preflight.KindVersions(tt.source, tt.target) {
				k := graph.KindString(kv.GroupKind)
				got[k] = kv.Source + ">" + kv.Target + " " + string(kv.Conversion) + " " + string(kv.Refusal)
				for _, s := range tt.says[k] {
					if !strings.Contains(kv.Message, s) {
						t.Errorf("%s: message %q does not say %q", k, kv.Message, s)
					}
				}
				if kv.Refusal != "" && kv.Conversion != "" && kv.Refusal != preflight.RefusalStoredAtOtherVersions {
					t.Errorf("%s: refused (%s) and converted (%s) at once", k, kv.Refusal, kv.Conversion)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("KindVersions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKindVersionsAreSortedByKindAndLeaveOutSecretsAndConfigMaps(t *testing.T) {
	source := types(kind(core, "Machine", "machines", "v1beta1"), kind(core, "Cluster", "clusters", "v1beta1"))
	var got []string
	for _, kv := range preflight.KindVersions(source, source) {
		got = append(got, graph.KindString(kv.GroupKind))
	}
	if diff := cmp.Diff([]string{"Cluster.cluster.x-k8s.io", "Machine.cluster.x-k8s.io"}, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

// CheckKindVersions is CheckCRDs' contract (nil, or one error naming every
// kind) with the differences the operator converts let through.
func TestCheckKindVersions(t *testing.T) {
	older := types(kind(core, "Cluster", "clusters", "v1beta1"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta1"))
	newer := types(kind(core, "Cluster", "clusters", "v1beta2"), kind(kubeadm, "KubeadmControlPlane", "kubeadmcontrolplanes", "v1beta2"))
	if err := preflight.CheckKindVersions(older, newer); err != nil {
		t.Errorf("v1beta1 into v1beta2: %v, want none: the operator converts both kinds", err)
	}
	if err := preflight.CheckCRDs(older, newer); err == nil {
		t.Error("CheckCRDs let v1beta1 into v1beta2 through: this test no longer shows the difference")
	}

	withProvider := types(kind(core, "Cluster", "clusters", "v1beta1"), kind(infra, "DockerMachine", "dockermachines", "v1beta1"))
	newerProvider := types(kind(core, "Cluster", "clusters", "v1beta2"))
	err := preflight.CheckKindVersions(withProvider, newerProvider)
	if err == nil {
		t.Fatal("no error, want one naming dockermachines")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "the CRDs do not allow a move: ") || !strings.Contains(msg, "dockermachines") || strings.Contains(msg, "clusters (") {
		t.Errorf("error %q: want CheckCRDs' prefix, dockermachines named and nothing about clusters", msg)
	}
}

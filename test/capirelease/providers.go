package capirelease

import (
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/move-operator/move-operator/test/capiprovider"
)

// Provider names as clusterctl writes them into the cluster.x-k8s.io/provider
// label and names the inventory entries: the same words as package
// capiprovider's, for the same providers at another version.
const (
	CoreProvider                = capiprovider.CoreProvider
	KubeadmBootstrapProvider    = capiprovider.KubeadmBootstrapProvider
	KubeadmControlPlaneProvider = capiprovider.KubeadmControlPlaneProvider
)

// providerSpec says where a provider's manifests and main package are.
type providerSpec struct {
	// name is clusterctl's name of the provider instance, e.g.
	// "bootstrap-kubeadm"; clusterctlName its provider name, "kubeadm".
	name, clusterctlName string
	providerType         clusterctlv1.ProviderType
	// configDir is the kustomize base `clusterctl init` installs, relative
	// to the module root (release manifests are `kustomize build` of it).
	configDir string
	manager   manager
	// serviceHost is the host number of the webhook Service's fixed
	// ClusterIP in the cluster's Service range: the numbers package
	// capiprovider gives the same providers, since a cluster holds one
	// Cluster API or the other.
	serviceHost int
}

var providerSpecs = []*providerSpec{
	{name: CoreProvider, clusterctlName: "cluster-api", providerType: clusterctlv1.CoreProviderType,
		configDir: "config/default", manager: coreManager, serviceHost: 10},
	{name: KubeadmBootstrapProvider, clusterctlName: "kubeadm", providerType: clusterctlv1.BootstrapProviderType,
		configDir: "bootstrap/kubeadm/config/default", manager: kubeadmBootstrapManager, serviceHost: 11},
	{name: KubeadmControlPlaneProvider, clusterctlName: "kubeadm", providerType: clusterctlv1.ControlPlaneProviderType,
		configDir: "controlplane/kubeadm/config/default", manager: kubeadmControlPlaneManager, serviceHost: 12},
}

// Package capioperator gives tests a management setup installed the
// cluster-api-operator way: its provider CRDs, installed from the
// sigs.k8s.io/cluster-api-operator module this project pins in go.mod, its
// provider objects (which cluster-api-operator keeps instead of clusterctl's
// inventory), and a stand-in for its controller.
//
// The stand-in does the one thing of cluster-api-operator that matters to a
// move: while its own Deployment has Ready pods, it scales every provider
// Deployment found at zero back to one replica, as cluster-api-operator
// reconciles a provider Deployment back to what its provider object asks
// for. It never installs anything.
package capioperator

// Package fleet creates, in a local management cluster with the Cluster API
// setup installed (package capiprovider), a fleet of N workload clusters
// with the complete set of objects the Cluster API controllers produce for a
// provisioned cluster: the objects, their ownerReferences, labels,
// annotations, finalizers and statuses. Every object is created through the
// real admission webhooks, so the fixture is valid by construction.
//
//	f, err := fleet.Create(ctx, c, fleet.Options{Clusters: 3, Workers: 2, Namespaces: []string{"team-a", "team-b"}})
//
// Per workload cluster: the Cluster, its LoopCluster, a KubeadmControlPlane
// with its LoopMachineTemplate, control-plane Machines with KubeadmConfigs,
// LoopMachines and bootstrap data Secrets; a MachineDeployment owning a
// MachineSet owning the worker Machines (with theirs); the cluster Secrets
// (kubeconfig, ca, etcd, sa, proxy); a MachineHealthCheck; a MachinePool with
// its KubeadmConfig, LoopMachinePool and bootstrap Secret; an
// IPAddressClaim/IPAddress pair claimed by the first control-plane
// LoopMachine; and a ClusterResourceSetBinding. Per namespace: a
// ClusterResourceSet with its Secret and ConfigMap. Shared: a cluster-scoped
// LoopClusterIdentity labelled clusterctl.cluster.x-k8s.io/move-hierarchy,
// with its credentials Secret in the provider namespace. With
// Options.Hosts, also a BareMetalHost per worker Machine (package
// hostprovider), consumed by its LoopMachine and without status: the host
// controller, when it runs, provisions each once.
//
// Clusters cycle through three shapes: classic (every object created
// directly), ClusterClass-based with the ClusterClass in the cluster's
// namespace, and ClusterClass-based with the ClusterClass in another
// namespace (Options.ClassNamespace). N >= 3 gives all three.
//
// Statuses are those of a provisioned cluster, so clusterctl's move preflight
// checks pass: infrastructure provisioned, control plane initialized, every
// Machine with a nodeRef. Names are derived deterministically from the
// options, so two fleets created with the same options look alike.
//
// The fixture writes what the controllers would write. Without
// Options.Live it is meant for clusters where no controller runs. With
// Options.Live (live controllers, testenv.Options.Controllers) it also makes
// what the controllers and the infrastructure would have made outside the
// management cluster (VMs in the cloud, Nodes and static pods in the
// workload API server, real certificates and a working kubeconfig, see
// Live), creates each Cluster paused and unpauses it once complete (as a
// move creates clusters in its target), and leaves the
// ClusterResourceSetBinding to the ClusterResourceSet controller, so the
// controllers take the fleet over without creating or deleting a Machine
// or a VM. ClusterClass-based clusters carry the labels and selectors the
// topology controller computes, in both modes.
package fleet

// Package loopprovider holds the controllers of "loop", the project's
// infrastructure provider for tests: LoopCluster, LoopMachine and
// LoopMachinePool reconcilers that provision against a simulated cloud
// (package cloud), following the Cluster API v1beta2 infrastructure contract
// the way CAPV and CAPA do.
//
//	err := loopprovider.SetupWithManager(ctx, mgr, loopprovider.Options{Cloud: c, ManagementCluster: "source"}, controllerOptions)
//
// What runs: for a LoopMachine owned by a Machine whose Cluster's
// infrastructure is provisioned and whose bootstrap data exists, the
// controller finds the machine's VM (by the providerID it recorded, or by
// name when none was recorded, as providers find instances by tag) and
// creates one only when none exists; it then records spec.providerID
// (loop:///<namespace>/<name>, also the VM's name) and reports
// status.initialization.provisioned, status.addresses and a Ready
// condition that follows the VM's power state. A deleted LoopMachine's VM
// is powered off and deleted (as CAPV does), unless the LoopMachine carries
// clusterctl.cluster.x-k8s.io/delete-for-move: a move deletes the source's
// copy, never the machine. LoopMachinePools keep one VM per replica
// (<namespace>/<pool>-<i>) and list them in spec.providerIDList; LoopClusters
// report their failure domains (the first one for control planes) and
// provisioned. Every kind carries its finalizer while it exists.
//
// Pause: like any provider, the controllers skip objects whose Cluster has
// spec.paused or which carry cluster.x-k8s.io/paused, unless
// Switches.SetIgnorePause(true): then they act on paused objects, as users
// have reported of real providers; unless Switches.SetDeleteIgnoresMove(true):
// then the delete path runs for paused objects and ignores delete-for-move,
// so a move's deletion of the source's copy powers off and deletes the VMs,
// as a provider that guards only its normal path with pause does. Cloud calls can be held open from the
// test (cloud.Cloud.Hold): a reconcile stays in flight until released,
// whatever its context says, and then records what the cloud did even
// during a graceful shutdown (a provider that dropped the result of a call
// the cloud has carried out would leak the VM).
//
// What differs from a real provider: no load balancers, security groups or
// networks; VMs are found by name rather than by tag; a LoopClusterIdentity
// is never checked (its Secret is only data to move); and the controllers
// run in the test process (see package capiprovider), not in a pod.
package loopprovider

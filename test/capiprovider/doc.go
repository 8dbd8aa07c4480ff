// Package capiprovider installs into a local management cluster (package
// localcluster) the Cluster API management setup exactly as
// `clusterctl init --infrastructure loop` leaves it, and plays the part of
// the provider Deployments' pods: it serves their webhooks and, when asked
// (Options.Controllers), runs their real controllers.
//
//	inst, err := capiprovider.Install(ctx, cluster, capiprovider.Options{})
//	// Stopping the cluster stops inst too; inst.Stop() stops it earlier.
//	core := inst.Provider(capiprovider.CoreProvider)
//	core.WaitServing(ctx, false)     // after scaling capi-controller-manager to zero
//	core.WaitControllers(ctx, false) // with Options.Controllers: none in flight any more
//	inst.Writes()                    // every write the controllers sent
//
// What is installed:
//
//   - The real CRDs, webhook configurations, Services, ServiceAccounts, RBAC
//     and controller Deployments of the core, kubeadm bootstrap and kubeadm
//     control plane providers, rendered from the kustomize bases inside the
//     sigs.k8s.io/cluster-api module this binary is built with, and processed
//     as clusterctl processes them (variables, the clusterctl.cluster.x-k8s.io
//     and cluster.x-k8s.io/provider labels, release images). ClusterTopology
//     is enabled, as with CLUSTER_TOPOLOGY=true.
//   - "loop", the project's own infrastructure provider for tests (kinds
//     LoopCluster, LoopClusterTemplate, LoopMachine, LoopMachineTemplate,
//     LoopMachinePool and the cluster-scoped LoopClusterIdentity in
//     infrastructure.cluster.x-k8s.io/v1alpha1), laid out and installed like
//     a real provider, with its own validating webhook.
//   - clusterctl's inventory: the Provider CRD and one Provider per provider.
//   - With Options.Hosts only: Metal3's BareMetalHost kind as package
//     hostprovider has it, its CRD labelled for clusterctl (installed
//     beside the providers, as Metal3's baremetal-operator is, so without
//     a provider label) and the ClusterRole that aggregates into the
//     operator's role what a move needs on it (docs/access.md); with live
//     controllers, its controller runs in the loop provider's manager.
//
// What differs from a real cluster, and why: cert-manager is not installed;
// the harness issues the serving certificates itself and injects their CA
// into the webhook configurations and CRD conversion settings, as
// cert-manager's cainjector would. The controller Deployments run as kwok
// pods (placed on the fake nodes): without Options.Controllers no
// controller reconciles anything.
//
// Live controllers (Options.Controllers): for each provider, a
// controller-runtime manager built as that provider's main.go in the
// sigs.k8s.io/cluster-api module builds it (managers.go: the same scheme,
// cache and client options from core/setup, bootstrap/kubeadm/setup and
// controlplane/kubeadm/setup, the indexes, a ClusterCache, the CRD
// migrator and every reconciler with its default concurrency: Cluster,
// Machine, MachineSet, MachineDeployment, MachineHealthCheck, MachinePool,
// ClusterResourceSet and its binding, ClusterClass and the topology
// reconcilers; KubeadmConfig; KubeadmControlPlane), and for the loop
// provider its controllers against the test environment's simulated cloud
// (package loopprovider). A manager runs like the process of one pod
// (live.go): it starts when a pod of the Deployment is Ready (the harness
// then holds that pod with ProcessFinalizer, as a kubelet keeps a
// terminating pod until its containers exit), and when that pod starts
// terminating it gets SIGTERM: the manager's context is cancelled and
// controller-runtime's graceful shutdown lets in-flight reconciles finish,
// for at most the pod's terminationGracePeriodSeconds; past it comes
// SIGKILL: nothing the manager sends leaves the process any more
// (Write.Refused). Only then is the pod released, so "the pod is gone"
// means, as in a real cluster, "no reconcile of it is in flight". A
// provider's controllers and webhooks share the gate, so a terminating
// provider's own late writes are refused by its own webhook, as in a real
// cluster. Every write the controllers send to the management cluster is
// recorded (Installation.Writes: verb, kind, namespace/name, subresource,
// time, answer); their writes to workload clusters are not. Each
// provider's controllers log to controllers-<provider>.log in the
// cluster's log directory; Provider.Runs lists their lives.
//
// What still differs with live controllers: they run in the test process,
// not in the pod (kwok runs no containers); two clusters' managers share
// the process, so controller names are not validated in the metrics
// registry, informer names are made unique per run, and the feature gates
// (ClusterTopology and MachinePool on) are set once for the process; there
// is no leader election, no metrics or health endpoint, and no version
// check of the API server; the KubeadmControlPlane etcd client logs
// nowhere. The workload clusters they reach are simulated (package
// workload), and so is the infrastructure (packages loopprovider, cloud).
//
// Webhooks: each provider's webhook Service keeps its real selector and gets
// a fixed ClusterIP from the cluster's loopback Service range. The harness
// serves that provider's real admission and conversion webhooks (the code of
// the cluster-api module, registered as the provider's main.go registers it)
// on <ClusterIP>:443, with a certificate for <service>.<namespace>.svc, but
// only while a pod selected by the Service is Ready and not terminating: the
// API server dials the ClusterIP, so with the Deployment at zero every call
// fails with "connect: connection refused", as in a real cluster, and the
// webhook configurations keep failurePolicy: Fail as shipped.
//
// The webhooks log through controller-runtime's logger: binaries other than
// tests should call ctrl.SetLogger (testenv.Main does it for tests).
//
// The package never changes a webhook configuration or a Deployment after
// installing it; tests and the operator do that. The only object it writes
// afterwards is its finalizer on the pod running a provider's controllers.
package capiprovider

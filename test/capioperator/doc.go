// Package capioperator gives tests management setups installed the
// cluster-api-operator way: its provider CRDs, installed from the
// sigs.k8s.io/cluster-api-operator module this project pins in go.mod; the
// real cluster-api-operator (Real), which installs providers offline from
// ConfigMaps (Offline); provider objects made by hand, as it leaves them
// once it has installed a provider (Provider); and a stand-in for its
// controller (StandIn).
//
// # The real one
//
// Real runs the released manager binary of the pinned version (Binary:
// `go install sigs.k8s.io/cluster-api-operator/cmd@<version>`, built with
// the dependencies its own go.mod pins, cached outside the work tree) as a
// process against a local cluster while its Deployment has a Ready pod, as
// a kubelet would run its container (package podprocess, which runs
// Cluster API's released managers too): SIGTERM when the pod terminates,
// and the pod held (a finalizer) until the process has exited. A move's
// scale to zero stops it exactly as it stops the real thing in a real
// cluster.
//
// What it needs, found by trying (v0.29.0, Kubernetes 1.36 local clusters):
//
//   - Its CRDs, and clusterctl's inventory CRD (it records what it installs
//     in clusterctl's inventory, as clusterctl init does).
//   - No cert-manager: the components it applies are whatever the ConfigMap
//     holds (here one Deployment). Its own webhook server will not start
//     without serving files in --webhook-cert-dir, so Real writes a
//     certificate of its own; no webhook configuration points at it (the
//     provider objects are then neither defaulted nor validated).
//   - A CoreProvider (named cluster-api) Ready before any other provider:
//     until then the others wait ("Waiting for the CoreProvider to be
//     installed"). A provider whose name is not one of clusterctl's known
//     providers must say where its manifests are (spec.fetchConfig).
//   - For a ConfigMap source: keys components and metadata (a clusterctl
//     Metadata whose release series covers the version, contract v1beta1 or
//     v1beta2), and the version in the label provider.cluster.x-k8s.io/version
//     (or as the ConfigMap's name). It installs a provider within a second
//     or two of its objects being created, sets status.installedVersion and
//     ProviderInstalled, and its health check copies the Deployment's
//     Available condition into the provider object's Ready condition.
//
// What it does to a provider it installed and someone scaled to zero
// (TestTheRealClusterAPIOperatorScalesAProviderUpOnlyWhenItStartsOrResyncs
// in package controllers):
//
//   - It does not watch the Deployments it installed for their spec (its
//     health check watches them only to report Available), so a scale to
//     zero stays while it runs and nothing reconciles the provider object.
//   - But every reconcile of an installed provider applies the provider's
//     cached manifests again (server-side apply, ownership forced), replicas
//     included: back to the count of its manifests (the components', or the
//     provider object's spec.deployment.replicas), not to the count the
//     Deployment had before. A reconcile comes when it starts (every
//     provider, within a few hundred milliseconds: seen 200-300 ms after
//     the process started), on each --sync-period (10 minutes by default;
//     with 5s, seen 9s after the scale to zero), and on any change of the
//     provider object, its status included: its own health check flipping
//     Ready when a provider's Deployment becomes unavailable (while it
//     scales up, say) or available again, a CoreProvider change (every
//     other provider then), a ConfigMap change under --watch-configmap.
//     Right after an install, those status flips make it apply the
//     manifests several times in a row.
//
// So, during a move: stopped before the providers and started after them,
// it has nothing to undo; started in the middle of one (a restart, an
// upgrade, a GitOps tool re-applying its Deployment), it scales every
// provider it installed back up within a second; and after a move it sets
// every provider back to the replicas of its manifests, whatever the move
// restored (see docs/before-you-move.md).
//
// # The stand-in
//
// StandIn does, at once, what the real one does only when it starts or
// resyncs: while its own Deployment has a Ready pod, it scales every
// provider Deployment found at zero back to one replica (every 50 ms). It
// never installs anything. The tests keep it where that makes a wrong order
// visible at once, which the real one would show only by chance (its start
// or resync falling inside the window): a manager left running while the
// providers stop, or started before they are back, in a move, a rollback
// and a crash at every write; as the stand-in for managers other than
// cluster-api-operator (Rancher Turtles, a platform's own), found only by
// name; and as a repackaged cluster-api-operator found by its webhooks
// alone.
package capioperator

// Package capiprovider installs into a local management cluster (package
// localcluster) the Cluster API management setup exactly as
// `clusterctl init --infrastructure loop` leaves it, and plays the part of
// the provider controllers' webhook servers.
//
//	inst, err := capiprovider.Install(ctx, cluster, capiprovider.Options{})
//	// Stopping the cluster stops inst too; inst.Stop() stops it earlier.
//	core := inst.Provider(capiprovider.CoreProvider)
//	core.WaitServing(ctx, false) // after scaling capi-controller-manager to zero
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
//
// What differs from a real cluster, and why: cert-manager is not installed;
// the harness issues the serving certificates itself and injects their CA
// into the webhook configurations and CRD conversion settings, as
// cert-manager's cainjector would. The controller Deployments run as kwok
// pods (placed on the fake nodes), so no controller reconciles anything.
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
// installing it; tests and the operator do that.
package capiprovider

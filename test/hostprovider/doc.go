// Package hostprovider is a provider fixture whose state lives in its
// status: BareMetalHost (metal3.io/v1alpha1), a bare-metal host as Metal3
// models it, and a controller that provisions a host for its consumer
// against the simulated cloud (package cloud).
//
//	err := hostprovider.SetupWithManager(ctx, mgr, hostprovider.Options{Cloud: c, ManagementCluster: "source"}, controllerOptions)
//
// Why it exists: clusterctl move creates its copies without status, and
// Metal3's BareMetalHost keeps in its status what the cloud alone cannot
// tell again: which image a host was provisioned with, for which consumer.
// A host that arrives in the target without it is provisioned again, its
// disk wiped under the running node (metal3-io/baremetal-operator#431,
// kubernetes-sigs/cluster-api#2370). A move that carries the status
// (MoveOperation spec.objectStatusPolicy Carry) keeps the host as it is; one that
// rebuilds it (Rebuild, as clusterctl) does not. This package reproduces
// that and nothing else of Metal3.
//
// What is installed (CRD, OperatorRole): the BareMetalHost CRD, namespaced,
// with a status subresource, labelled clusterctl.cluster.x-k8s.io and
// clusterctl.cluster.x-k8s.io/move so that clusterctl and the operator
// take every host (no Cluster API object owns a host, so each moves on
// its own, as Metal3's users have clusterctl move theirs); and a ClusterRole
// labelled for aggregation into the operator's roles with the verbs
// docs/access.md gives for BareMetalHosts, as a Metal3 user would apply.
//
// What runs: a host whose spec.consumerRef names an existing consumer (a
// LoopMachine here, as CAPM3's Metal3Machine consumes a host) is
// provisioned unless its status says it already is, for that consumer:
// status.provisioning.state "provisioned" and status.consumerRef.uid the
// consumer's UID. Provisioning is one cloud.Provision call naming the host
// (cloud event type Provision), then the status is written: provisioning
// state and image, the consumer with its UID, and poweredOn. A host already
// provisioned for its consumer is left alone; a host without a consumer, or
// whose consumer does not exist yet, waits (a change of a LoopMachine
// brings the hosts it consumes back). Activity counts the reconciles that
// returned, so a test can tell that a controller looked at a host and left
// it alone.
//
// What differs from Metal3's BareMetalHost controller: no BMC, inspection,
// registration, power management or deprovisioning; the host and its
// consumer are read from the API server, not the cache, since a decision
// made on a stale read wipes a disk; there is no finalizer (a deleted host
// releases nothing); and it never checks Cluster pause: Metal3's host
// controller does not either (it has its own pause annotation,
// baremetalhost.metal3.io/paused, which clusterctl does not set), and
// Metal3's own answer to #431, the status annotation
// (baremetalhost.metal3.io/status) from which its controller restores a
// status-less host, is not reproduced: this host keeps its state in its
// status only. The controller runs in the loop provider's Deployment (see
// package capiprovider, Options.Hosts), so it stops and starts with it.
package hostprovider

// Package localcluster starts and stops a named local Kubernetes management
// cluster made of real processes on loopback: etcd and kube-apiserver (started
// through controller-runtime's envtest), kube-controller-manager, kube-scheduler
// and kwok with a fake Node. Deployments therefore really roll out, become
// Available and scale to zero, without a container runtime.
//
// Usage:
//
//	c, err := localcluster.Start(ctx, "source", localcluster.Options{})
//	if err != nil { ... }
//	defer c.Stop()
//	// c.Config is a system:masters *rest.Config, c.KubeconfigPath a kubeconfig file.
//
// Several clusters may run in one process and in several processes at once:
// each cluster reserves a loopback index N (see Cluster.Index) and uses
// 127.96.N.0/24 as its Service range and 127.97.N.0/24 for pod IPs, so
// Services with a fixed ClusterIP can be served on loopback by the test
// process itself (see package capiprovider).
//
// Every child process runs in its own process group and receives SIGKILL when
// the test process dies, however it dies (a panic, a test timeout, kill -9), so
// nothing outlives the test binary. The processes' output stays in
// Cluster.LogDir after Stop, for the failing test to point at. A process
// killed outright cannot remove its clusters' directories; the next Start
// removes their data (and, after a day, their logs).
//
// Binaries are found in $KUBEBUILDER_ASSETS or, when that is unset, by running
// hack/kube-binaries.sh from the repository root (see BinaryDir); those of an
// older Kubernetes release the script pins, in $KUBEBUILDER_ASSETS_1_33 or by
// running it with KUBE_VERSION=1.33 (see BinaryDirOf and Options.BinaryDir).
//
// StartAPIServer starts a bare control plane instead (etcd and
// kube-apiserver only, with a certificate authority given by the caller that
// both signs its serving certificate and authenticates clients, as kubeadm
// sets a cluster up): the shared workload API server of package workload.
//
// This package never installs anything into the cluster beyond the fake Node;
// Cluster API components live in package capiprovider.
package localcluster

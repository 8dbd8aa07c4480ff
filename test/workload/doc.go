// Package workload runs the workload clusters that the live controllers of
// the local management clusters reach: one shared API server per test
// environment (etcd and kube-apiserver on loopback, package localcluster),
// which every workload cluster of every fleet points at through its
// <cluster>-kubeconfig Secret. OnCluster serves a local management cluster
// itself the same way, for the one Cluster it stands for (a pivot: the
// bootstrap cluster's fleet holds the Cluster of the management cluster it
// created, which is moved there and then manages itself); that cluster is
// started with the Certificates' CA, and the Cluster's Nodes, static pods
// and kubeadm-config ConfigMap are registered in it.
//
//	w, err := workload.Start(ctx, workload.Options{})
//	kubeconfig, err := w.Kubeconfig("workload-0")
//	err = w.AddNode(ctx, workload.Node{Name: "m-1", ProviderID: "loop:///ns/m-1", ControlPlane: true, ...})
//
// What runs: a real kube-apiserver with its own etcd. Its one certificate
// authority (Certificates().CA) signs its serving certificate and
// authenticates clients, as kubeadm sets a cluster up, so the admin
// kubeconfigs Cluster API writes with a cluster's <cluster>-ca Secret work
// against it, as do the ones Kubeconfig issues.
//
// What is simulated: the nodes. AddNode registers a Node per Machine, with
// the Machine's providerID, Ready, and for control-plane machines the
// kubeadm label and taint and the static pods kube-apiserver-<node>,
// kube-controller-manager-<node> and kube-scheduler-<node> in kube-system,
// Running and Ready. That is what the Machine controller (node by
// providerID, NodeReady and NodeHealthy), the MachineHealthCheck (healthy
// nodes), the ClusterCache (a reachable API server) and the
// KubeadmControlPlane controller (control plane components healthy) read.
// Nothing runs on the nodes: no kubelet, no controller manager, no
// scheduler; nothing changes a Node or pod after AddNode except the
// controllers (the Machine controller writes labels and annotations).
//
// What differs from a real workload cluster, and why it is safe: all
// workload clusters share one API server, so a Node's name must be unique
// across the fleets of a test environment (Machine names are). The control
// planes use external etcd (the fleet configures
// clusterConfiguration.etcd.external): KubeadmControlPlane reaches a stacked
// etcd's members only through a port-forward to the etcd pods, which needs
// a kubelet, so here it cannot see etcd members at all, and with external
// etcd it does not look for them. Etcd membership never triggers a
// rollout: KubeadmControlPlane rolls machines out only when their spec,
// bootstrap configuration or infrastructure template differ from its own,
// on certificate expiry (the fleet records the expiry annotation it would
// have read from the API server's certificate) or past rolloutAfter; etcd
// health only gates scaling and remediation, which need a Machine
// MachineHealthCheck-marked unhealthy or a replica count that differs, and
// the fleet gives neither.
package workload

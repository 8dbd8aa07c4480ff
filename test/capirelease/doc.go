// Package capirelease installs into a local management cluster (package
// localcluster) an older release of Cluster API, Version (v1.10.9, the last
// line of the v1beta1 contract), as `clusterctl init` leaves it, and runs
// its released manager binaries while their Deployments have Ready pods:
// the source of a move across contracts, whose target runs this module's
// Cluster API (package capiprovider).
//
//	inst, err := capirelease.Install(ctx, cluster, capirelease.Options{})
//	// Stopping the cluster stops inst too; inst.Stop() stops it earlier.
//	core := inst.Provider(capirelease.CoreProvider)
//	core.WaitServing(ctx, false) // after scaling capi-controller-manager to zero
//	core.WaitRunning(ctx, false) // its process has exited, its pod is gone
//
// What is installed: the core, kubeadm bootstrap and kubeadm control plane
// providers of the release, rendered from the kustomize bases inside the
// sigs.k8s.io/cluster-api module at Version (config/default,
// bootstrap/kubeadm/config/default, controlplane/kubeadm/config/default;
// capiprovider.RenderRelease) and processed as clusterctl processes them,
// with CLUSTER_TOPOLOGY=true as the target has it: namespaces, CRDs storing
// v1beta1 with their conversion webhooks pointing at the providers'
// Services, webhook configurations, Services, ServiceAccounts, the release's
// RBAC, Deployments, and clusterctl's inventory (its CRD from the release's
// clusterctl, one Provider per provider, version v1.10.9). As in package
// capiprovider, cert-manager is not installed: a certificate authority of
// the installation signs each provider's serving certificate and is
// injected as the caBundle of the webhook configurations and CRD conversion
// settings, and the certificate Secret the Deployment mounts is created as
// cert-manager would. Each webhook Service gets a fixed ClusterIP in the
// cluster's loopback Service range (the host numbers capiprovider gives the
// same providers), and the Deployments run as kwok pods.
//
// # The managers
//
// Binaries builds the three managers with `go install
// sigs.k8s.io/cluster-api@v1.10.9` (and .../bootstrap/kubeadm,
// .../controlplane/kubeadm), outside this module, with the dependencies the
// release pins (controller-runtime v0.20, Kubernetes libraries v0.32), and
// caches them beside the Kubernetes binaries (package gomodule:
// $MOVE_OPERATOR_CACHE/bin, or move-operator/bin under the user's cache
// directory, one directory per binary and version). Measured here, on 2
// cores shared with other work (load average 13 to 25): 15.5 minutes cold
// (the core manager 14, then the kubeadm bootstrap one 23 seconds and the
// control plane one about a minute, from the build cache the first filled);
// cached, a stat each (under a millisecond).
//
// Each manager runs as a child process of the test for as long as its
// Deployment has a Ready pod, as that pod's container would (package
// podprocess: started for a Ready pod and the pod held by ProcessFinalizer;
// SIGTERM when the pod terminates, SIGKILL after its
// terminationGracePeriodSeconds, 10s in the release; the pod let go once
// the process has exited; restarted with a back-off if it exits on its
// own). Its command line is the container's args from the Deployment as
// clusterctl rendered them (feature gates, --bootstrap-token-ttl), then:
//
//   - --kubeconfig: a kubeconfig holding a token of the Deployment's
//     ServiceAccount bound to the pod (TokenRequest), as a kubelet projects
//     one. The managers run as capi-manager and its kubeadm siblings, with
//     the release's own (aggregated) ClusterRoles: no admin credentials.
//     kube-controller-manager's clusterrole-aggregation controller fills the
//     aggregated role. The POD_NAMESPACE, POD_NAME and POD_UID variables are
//     resolved from the pod, as a kubelet resolves fieldRefs.
//   - --leader-elect=false, though the release asks for leader election:
//     out of a pod controller-runtime cannot find the namespace of its Lease
//     (it reads the pod's service account mount; the release has no flag
//     for it), and the manager exits at once with "unable to find leader
//     election namespace: not running in-cluster". One process runs per
//     Deployment anyway. (Found by trying too: as root, a private mount
//     namespace, unshare --mount, can put a pod's service account files at
//     /var/run/secrets/kubernetes.io/serviceaccount; not done, so the
//     harness needs no privilege.)
//   - --webhook-port on a free port and --webhook-cert-dir holding the
//     serving certificate (tls.crt, tls.key, as the Secret is mounted).
//     The release's webhook server binds every address (controller-runtime's
//     webhook.Options.Host, which no flag of the release sets), so it cannot
//     take <ClusterIP>:443 itself without taking port 443 of every address.
//   - --health-addr on a free loopback port: its readiness probe.
//   - --diagnostics-address=0: no metrics server (three managers per
//     cluster, and clusters side by side, would all want :8443).
//
// The manager prints "Starting manager" with an empty version: go install
// does not set the release's -ldflags (sigs.k8s.io/cluster-api/version).
// The managers read their version for logs and user agents only; nothing
// the tests here check depends on it.
//
// # Webhooks at the Service
//
// The API server dials the webhook Service's ClusterIP, port 443. While a
// manager's process runs and answers its readiness probe (GET /readyz,
// which controller-runtime passes once the webhook server has started), the
// harness listens on <ClusterIP>:443 and passes every connection, TLS and
// all, to the process's webhook port: what a Service does for the one ready
// endpoint of its Deployment. The manager terminates TLS with the
// certificate for <service>.<namespace>.svc the API server verifies against
// the caBundle. When the pod starts terminating the listener closes with
// every connection through it, before the process has finished its
// graceful shutdown, so the API server's next call fails with "failed
// calling webhook ... connect: connection refused" exactly as in a real
// cluster whose provider was scaled to zero. Measured here (four runs):
// refused 35-100ms after the scale to zero, the process gone 70-650ms
// after it (its graceful shutdown, well within the grace period, exit
// status 0), serving again 160-300ms after the scale back to one (a
// manager's webhook server serves some 150ms after its process starts,
// before its caches have synced).
//
// What differs from a real cluster: the managers run on the test machine,
// not in the pods (kwok runs no containers); there is no leader election
// (above) and no metrics endpoint; the pod is Ready (kwok's) before the
// process is, the Service endpoint only after it; a Deployment of several
// replicas still runs one process. The package never changes a webhook
// configuration or a Deployment after installing it; tests and the
// operator do that. The only objects it writes afterwards are its
// finalizer on the pod a manager runs for, and that pod's tokens.
package capirelease

// Package installed gives tests the operator as users install it, read from
// dist/install.yaml rather than restated: the identity of its Deployment
// (the Namespace, ServiceAccount, Roles, ClusterRoles and bindings of the
// file, applied to the source, and a token for that ServiceAccount from the
// TokenRequest API) and the manager process itself (the binary taken out of
// the image `make image` builds, run with the args and env of the
// Deployment's manager container).
//
// A test that starts the operator in-process builds its clients from
// Identity.Config; one that runs the binary uses Start. Either way the
// operator may do in the source exactly what the shipped RBAC lets it do, so
// a rule missing there fails the test that needs it. Admin credentials stay
// with the test, for setting up and inspecting.
//
// What differs from a pod, and why it does not matter for what is checked:
//
//   - No kubelet and no container runtime run the manager: it is a process
//     on the test machine. The image's binary is the one that runs, with the
//     Deployment's command-line args and env; the container's security
//     context, probes and resource requests are the kubelet's business, not
//     the operator's.
//   - A pod reads its ServiceAccount token, CA and namespace from files the
//     kubelet projects. Here a kubeconfig names the same API server, CA and
//     a token file (client-go re-reads a token file, as it does a projected
//     token), and the namespace the pod would read from its ServiceAccount
//     files is passed as --leader-election-namespace, which is where the
//     manager would put its leases in the pod.
//   - A pod has a network namespace of its own; processes here share the
//     host's, so the metrics and probe addresses of the Deployment's args
//     are replaced by free loopback ports (Options.MetricsAddress,
//     ProbeAddress) and nothing else of the args changes.
//   - GOMEMLIMIT comes from the container's memory limit through the
//     downward API; Start resolves it from the same limit in the file.
//
// It never gives the operator more than the file grants.
package installed

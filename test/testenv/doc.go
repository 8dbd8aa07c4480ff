// Package testenv gives a test package one shared pair of local management
// clusters, "source" and "target", started in TestMain, each optionally with
// the Cluster API management setup installed. Tests isolate themselves by
// namespace (see NewNamespace) instead of starting clusters of their own.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, testenv.Options{CAPI: true}, &env)
//	}
//
// With Options.Controllers (and CAPI) the providers' real controllers run
// in both clusters while their Deployments have Ready pods (see package
// capiprovider), with one simulated cloud (Env.Cloud, package cloud) and
// one workload API server (Env.Workload, package workload) shared by both
// clusters, as a cloud account and the workload clusters are shared by
// every management cluster in the real world. Without it nothing
// reconciles, and the clusters start as before. Options.Hosts adds
// Metal3's BareMetalHost kind and its controller (package hostprovider),
// for the tests of a move that must carry status. Options.SelfHosted (with
// Controllers) starts the target with a certificate authority of its own
// and serves it as a workload cluster too (Env.SelfHosted, see
// workload.OnCluster): a fleet created in the source with
// fleet.Live{Workload: env.SelfHosted} is the Cluster the target stands
// for, and moving it there is a pivot.
//
// When a test fails, Main prints where each cluster's process logs are and
// keeps them; when all pass, it removes them.
package testenv

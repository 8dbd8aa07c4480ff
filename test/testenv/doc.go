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
// When a test fails, Main prints where each cluster's process logs are and
// keeps them; when all pass, it removes them.
package testenv

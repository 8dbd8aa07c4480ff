// Package integration tests packages graph and move together on two real
// local management clusters, with the real Cluster API CRDs and admission
// webhooks installed and serving (the providers are not scaled down: that is
// the controller's part). It holds tests only; they share one pair of
// clusters started in TestMain and isolate themselves by namespace.
package integration

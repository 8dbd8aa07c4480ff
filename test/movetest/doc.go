// Package movetest is what the tests of the MoveOperation reconciler share
// (package controllers' cluster tests, and the test packages split off it
// to run beside it, such as crashsweep and recovery): Main starts a test
// package's pair of local management clusters with Cluster API installed;
// StartOperator runs the reconciler in a real manager under the operator's
// installed identity, every write it makes counted and open to an injected
// crash or fault; and the helpers create fleets, MoveOperations and their
// namespaces, wait for phases, and check what a move left in both clusters
// (snapshots, controllers and webhooks, pauses, owners).
//
// Its code builds only with the tag "cluster", as the tests that use it; it
// is imported by tests only.
package movetest

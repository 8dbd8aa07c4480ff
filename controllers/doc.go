// Package controllers holds the MoveOperation reconciler: the phase state
// machine that drives a move with the domain packages under internal/. It
// owns reconcile concerns only (fetching, finalizers, status patching,
// events); what a move does to the clusters lives below internal/.
package controllers

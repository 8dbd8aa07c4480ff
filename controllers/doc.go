// Package controllers holds the MoveOperation reconciler: the phase state
// machine that drives a move with the domain packages under internal/. It
// owns reconcile concerns only (fetching, finalizers, status patching,
// events); what a move does to the clusters lives below internal/.
//
// The phases are the rows of one table (phases.go), one file each
// (phase_<name>.go): a row names what must hold before its step (the
// target's client, the bypass following the operator's identities: see
// substeps.go), its step as an ordered list of sub-steps, its successor,
// where a failure or a deletion leads, and how long an error may last.
// What a restarted operator must find again is in the clusters and the
// MoveOperation's status, never only in the reconciler's memory (memo.go).
package controllers

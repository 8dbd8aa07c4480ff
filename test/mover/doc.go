// Package mover moves the Cluster API state of some namespaces from the
// source to the target of a testenv.Env, the way a user would: with the
// operator (a MoveOperation handled by the real reconciler, run in-process
// under its own identity) or with clusterctl's Go library (`clusterctl
// move`). It records when each step of a move began, so that tests can line
// up the controllers' writes and the cloud's events with the move.
//
// It never creates fleets and never judges a move: what a move must leave
// behind is the caller's to check.
package mover

// Package quiesce stops and restarts the provider controllers of a management
// cluster for the duration of a move, and keeps the objects in flight
// writable while their admission webhooks are down.
//
// Everything it needs to undo its work is written to the cluster itself (the
// original replica count on each Deployment, the original objectSelectors on
// each webhook configuration), never held in memory, so a restarted operator
// can finish or undo what a crashed one began. Every function is idempotent.
//
// It never touches a Deployment or webhook that the caller did not select, and
// never changes any field of a webhook but its objectSelector.
package quiesce

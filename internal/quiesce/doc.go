// Package quiesce stops and restarts the provider controllers of a management
// cluster for the duration of a move, and lets the operator's own requests
// past the admission webhooks those controllers serve while they are down.
//
// The webhook bypass is scoped to the operator's identity: a match condition
// that is false for the operator's username (learnt with a SelfSubjectReview)
// makes the API server skip the webhook for the operator's requests alone.
// Everyone else's writes still reach the stopped webhooks and are refused, a
// write freeze for the duration of the move. The condition names the
// username it lets through, and is the record of it: when the operator's
// credential for a cluster changes identity during a move (a rotated
// target credential of another ServiceAccount), RebindBypass rewrites it
// for the new identity in place, and RemoveBypass removes it by name,
// whichever identity it names.
//
// Everything it needs to undo its work is written to the cluster itself (the
// original replica count on each Deployment, the named match condition on
// each webhook), never held in memory, so a restarted operator can finish or
// undo what a crashed one began. Every function is idempotent.
//
// It never touches a Deployment or webhook that the caller did not select,
// and never changes any field of a webhook but its own match condition.
package quiesce

// Package preflight holds the checks a move passes before it writes
// anything, as one ordered list (Checks): the MoveOperation's input, the
// target (reachable, not the source), the CRDs to move (in the target at the
// same storage version, no objects stored at another version), the
// operator's access in both clusters to everything the move does there
// (asked before anything lists the moved kinds, see internal/access), the
// providers and their managers, the plan (no object whose owner stays
// behind), the clusters' provisioning, what the target already holds, and
// the GitOps managers of the moved objects. Every check runs, so that a
// dry run reports every finding at once. It only reads.
package preflight

// Package preflight holds the checks that compare the source and target
// clusters before a move writes anything: the CRDs to move exist in the
// target at the same storage version, no objects are stored at another
// version, the source's providers are installed in the target, and nothing
// the move would create is already in the target. It only reads.
package preflight

// Package crashsweep holds the crash sweep of a move: the operator stopped
// before every one of its writes, and a fresh one that must finish the move
// as an uninterrupted one does (the rollback's sweep is in package
// recovery). It is a package of its own, with its own pair of local
// clusters (see package movetest), because it is the longest of the
// reconciler's cluster tests: it runs beside the others instead of after
// them. The package has no code of its own.
package crashsweep

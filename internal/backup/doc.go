// Package backup writes a move's plan to an archive and restores an
// archive into a cluster, on the move's one plan path: the plan comes from
// internal/planner (from the source cluster when backing up, from the
// archive, read as a client.Reader, when restoring), the objects are read
// as a move reads them (move.ReadGroup) and written as a move writes them
// (move.Copier: creation order, owner UIDs rewired, statuses carried,
// resumable after a crash at any write).
//
// What stops and starts the clusters' controllers around a backup or a
// restore is the caller's, as it is for a move.
package backup

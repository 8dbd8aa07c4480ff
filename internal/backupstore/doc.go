// Package backupstore keeps archives (internal/archive) where a lost
// management cluster is not: a directory on a volume, or an OCI artifact in
// a registry.
//
// A store takes an archive whole or not at all. The archive is written to
// a temporary file first (so that a backup's memory does not grow with the
// fleet, and its digest is known before anything is stored), then renamed
// into the directory, or pushed to the registry blob by blob with the
// manifest last: a backup that dies half-way leaves no archive a restore
// could take for a whole one.
package backupstore

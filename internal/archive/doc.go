// Package archive writes a plan's objects to an archive and reads them
// back: the backup of a management cluster, and what a restore starts from.
//
// An archive is a tar stream, encrypted by default to age X25519
// recipients (age authenticates every 64 KiB chunk and the end of the
// stream, so a changed byte or a cut archive is refused, not read). Inside:
//
//	objects/<Kind>_<namespace>_<name>.yaml   each object as the source served it
//	                                         (status, UID and owner references
//	                                         included), written in the plan's
//	                                         creation order, group by group
//	index.json                               written last: what the archive
//	                                         holds, each object's group and the
//	                                         SHA-256 of its file
//
// The object files are named and written as `clusterctl move --to-directory`
// writes them (cmd/clusterctl/client/cluster/mover.go), so that an
// unencrypted archive unpacked to a directory (Unpack) is a directory
// clusterctl reads with --from-directory, and a directory clusterctl wrote
// is read here (ReadDirectory) as an archive without an index.
//
// The index comes last so that the writer streams: it never holds more than
// one object, whatever the fleet's size, and keeps the index's entries in a
// spool file until it copies them into the archive, last. A reader that
// finds no index has read a cut archive. A reader opens an archive from a
// file (Open): it checks every file once, keeps the index and where each
// file is, and reads each object again from the file when asked for it
// (age decrypts any 64 KiB chunk on its own), so neither side holds the
// archive.
//
// This package knows nothing of clusters, phases or stores: it turns
// objects into bytes and bytes into objects, and says plainly what is wrong
// with bytes that are not an archive it can read.
package archive

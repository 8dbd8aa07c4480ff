package archive

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Format names this layout in every index; a reader refuses an index of
// another format rather than guess at it.
const Format = "move-operator.cluster.x-k8s.io/archive/v1"

const (
	objectsDir = "objects/"
	indexFile  = "index.json"
)

// Index is what an archive holds, written as its last file.
type Index struct {
	// Format is Format.
	Format string `json:"format"`
	// Taken is when the source's objects were read.
	Taken time.Time `json:"taken"`
	// Source identifies the cluster the objects were read from (the UID of
	// its kube-system namespace), so that a restore into the same cluster
	// can be told from one into a new cluster.
	Source types.UID `json:"source,omitempty"`
	// Namespaces are the namespaces the backup took (empty: every one); a
	// restore creates each of them, even one that holds nothing.
	Namespaces []string `json:"namespaces,omitempty"`
	// ClusterSelector is the Cluster selector the backup took, as a string.
	ClusterSelector string `json:"clusterSelector,omitempty"`
	// PausedBy is the operation that paused the archived Clusters and
	// ClusterClasses before they were read (their paused-by annotation):
	// a restore resumes what it paused, and nothing a user had paused.
	// Empty for a directory clusterctl wrote, whose restore resumes every
	// paused Cluster and ClusterClass, as clusterctl's does.
	PausedBy string `json:"pausedBy,omitempty"`
	// Groups is how many creation groups the objects fill.
	Groups int `json:"groups"`
	// Objects are the archive's objects, in the order they were written.
	Objects []Entry `json:"objects"`
}

// Entry is one object of an archive.
type Entry struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	// Group is the object's creation group: every owner of an object is in
	// an earlier group, or in the same one when they own each other.
	Group int `json:"group"`
	// File is the object's file in the archive.
	File string `json:"file"`
	// SHA256 is the hex SHA-256 of the file, which an unencrypted archive
	// relies on to find a changed byte.
	SHA256 string `json:"sha256"`
}

// GroupVersionKind returns the entry's kind and version.
func (e Entry) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(e.APIVersion, e.Kind)
}

// String names the entry as the operator's messages name objects.
func (e Entry) String() string {
	if e.Namespace == "" {
		return fmt.Sprintf("%s %s", e.GroupVersionKind().GroupKind(), e.Name)
	}
	return fmt.Sprintf("%s %s/%s", e.GroupVersionKind().GroupKind(), e.Namespace, e.Name)
}

// FileName is the file clusterctl move --to-directory writes an object to
// (its node's getFilename): kind, namespace and name, joined by "_".
func FileName(kind, namespace, name string) string {
	return kind + "_" + namespace + "_" + name + ".yaml"
}

// Kinds counts the index's objects per kind ("Cluster.cluster.x-k8s.io"),
// for listings.
func (ix Index) Kinds() map[string]int {
	counts := map[string]int{}
	for _, e := range ix.Objects {
		counts[e.GroupVersionKind().GroupKind().String()]++
	}
	return counts
}

// Why an archive cannot be read. Each error a reader returns wraps one of
// them, with a message that says what to do.
var (
	// ErrKeyRequired: the archive is encrypted and no key was given.
	ErrKeyRequired = errors.New("the archive is encrypted")
	// ErrWrongKey: no key given is one the archive was encrypted to.
	ErrWrongKey = errors.New("no key given can decrypt the archive")
	// ErrDamaged: the archive was changed or cut after it was written.
	ErrDamaged = errors.New("the archive is damaged")
	// ErrNotArchive: the bytes are not an archive of this format.
	ErrNotArchive = errors.New("not a move-operator archive")
)

// damaged wraps ErrDamaged with what was found.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s; it was changed or cut after it was written: restore from another backup, or take a new one",
		ErrDamaged, fmt.Sprintf(format, args...))
}

// validName reports whether an archive's file name is one this format
// writes: an object file directly under objects/, or the index. A name
// with a path of its own is refused, so that unpacking never writes outside
// its directory.
func validName(name string) bool {
	if name == indexFile {
		return true
	}
	base, ok := strings.CutPrefix(name, objectsDir)
	return ok && base != "" && !strings.ContainsAny(base, "/\\") && base != "." && base != ".." &&
		strings.HasSuffix(base, ".yaml")
}

package archive

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Encryption says how an archive is written.
type Encryption struct {
	// Recipients are the public keys the archive is encrypted to; any of
	// their private keys reads it.
	Recipients []age.Recipient
	// Unencrypted writes the archive in the clear. It is never the default:
	// an archive holds every credential of the fleet, so a writer without
	// recipients refuses to write unless this is set.
	Unencrypted bool
}

// ErrNoRecipients: a writer was asked to encrypt with no key to encrypt to.
var ErrNoRecipients = errors.New("an archive is encrypted to at least one public key (an age X25519 recipient, age1...), and none was given; give one, or ask for an unencrypted archive by name")

// Writer writes one archive, an object at a time; it holds one object at
// most, so that a backup's memory does not grow with the fleet.
type Writer struct {
	tar     *tar.Writer
	crypt   io.WriteCloser // nil when unencrypted
	index   Index
	written map[string]bool
	// modTime is the time of every file, the backup's: an archive of the same
	// objects taken at the same time is the same bytes before encryption.
	modTime time.Time
}

// NewWriter starts an archive written to w, of objects read at taken.
func NewWriter(w io.Writer, enc Encryption, taken time.Time) (*Writer, error) {
	aw := &Writer{index: Index{Format: Format, Taken: taken.UTC()}, written: map[string]bool{}, modTime: taken.UTC()}
	switch {
	case len(enc.Recipients) > 0:
		crypt, err := age.Encrypt(w, enc.Recipients...)
		if err != nil {
			return nil, fmt.Errorf("starting the archive's encryption: %w", err)
		}
		aw.crypt, w = crypt, crypt
	case !enc.Unencrypted:
		return nil, ErrNoRecipients
	}
	aw.tar = tar.NewWriter(w)
	return aw, nil
}

// Add writes obj, of the given creation group, as the source served it.
// Objects are added in creation order: a group after every earlier one.
func (w *Writer) Add(group int, obj *unstructured.Unstructured) error {
	if n := len(w.index.Objects); n > 0 && group < w.index.Objects[n-1].Group {
		return fmt.Errorf("adding %s of group %d after an object of group %d: objects are added in creation order", obj.GetName(), group, w.index.Objects[n-1].Group)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	file := objectsDir + FileName(obj.GetKind(), obj.GetNamespace(), obj.GetName())
	if w.written[file] {
		// Two kinds of one name in two groups (clusterctl's names leave the
		// group out) would overwrite each other when unpacked.
		return fmt.Errorf("two objects are named %s in the archive: %s of %s and another of the same kind, namespace and name", file, obj.GetName(), obj.GetAPIVersion())
	}
	if err := w.writeFile(file, data); err != nil {
		return err
	}
	w.written[file] = true
	sum := sha256.Sum256(data)
	w.index.Objects = append(w.index.Objects, Entry{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), Group: group, File: file, SHA256: hex.EncodeToString(sum[:]),
	})
	w.index.Groups = max(w.index.Groups, group+1)
	return nil
}

// Close writes the index, with what the caller says of the backup, and
// ends the archive (and its encryption). An archive whose Close did not
// return nil is not one: a reader refuses it.
func (w *Writer) Close(about Index) error {
	ix := w.index
	ix.Source, ix.Namespaces, ix.ClusterSelector, ix.PausedBy = about.Source, about.Namespaces, about.ClusterSelector, about.PausedBy
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the archive's index: %w", err)
	}
	if err := w.writeFile(indexFile, data); err != nil {
		return err
	}
	if err := w.tar.Close(); err != nil {
		return fmt.Errorf("ending the archive: %w", err)
	}
	if w.crypt != nil {
		if err := w.crypt.Close(); err != nil {
			return fmt.Errorf("ending the archive's encryption: %w", err)
		}
	}
	return nil
}

// Len is how many objects were added.
func (w *Writer) Len() int { return len(w.index.Objects) }

func (w *Writer) writeFile(name string, data []byte) error {
	hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: w.modTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := w.tar.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s to the archive: %w", name, err)
	}
	if _, err := w.tar.Write(data); err != nil {
		return fmt.Errorf("writing %s to the archive: %w", name, err)
	}
	return nil
}

package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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

// WriterOption changes how a Writer writes.
type WriterOption func(*Writer)

// SpoolIn makes the Writer keep its index, until Close, in a file of dir
// (the system's temporary directory when empty): the operator's spool
// directory, which its read-only root filesystem leaves writable.
func SpoolIn(dir string) WriterOption {
	return func(w *Writer) { w.spoolDir = dir }
}

// Writer writes one archive, an object at a time. It holds one object at
// most, and of the index only what a check of the next object needs: the
// index's entries go to a spool file as they are made, and are copied into
// the archive at Close. So a backup's memory does not grow with the fleet.
type Writer struct {
	tar   *tar.Writer
	crypt io.WriteCloser // nil when unencrypted
	// modTime is the time of every file, the backup's: an archive of the same
	// objects taken at the same time is the same bytes before encryption.
	modTime time.Time
	taken   time.Time

	// spool holds the index's entries, as JSON, one after another (see
	// entries); nil until the first Add.
	spoolDir string
	spool    *indexSpool
	// objects and groups count the entries, lastGroup is the last one's.
	objects, groups, lastGroup int
	// names are the object files written so far, each as a 128-bit hash of
	// its name: two objects of one file name would overwrite each other
	// when unpacked. 24 bytes an object rather than the name's 60 and
	// more; two names of one hash (odds of 1 in 10^28 at a million
	// objects) would refuse the backup, never write a wrong archive.
	names map[[16]byte]struct{}
}

// NewWriter starts an archive written to w, of objects read at taken.
func NewWriter(w io.Writer, enc Encryption, taken time.Time, opts ...WriterOption) (*Writer, error) {
	aw := &Writer{modTime: taken.UTC(), taken: taken.UTC(), names: map[[16]byte]struct{}{}}
	for _, o := range opts {
		o(aw)
	}
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
	if w.objects > 0 && group < w.lastGroup {
		return fmt.Errorf("adding %s of group %d after an object of group %d: objects are added in creation order", obj.GetName(), group, w.lastGroup)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	file := objectsDir + FileName(obj.GetKind(), obj.GetNamespace(), obj.GetName())
	sum := sha256.Sum256([]byte(file))
	name := [16]byte(sum[:16])
	if _, dup := w.names[name]; dup {
		// Two kinds of one name in two groups (clusterctl's names leave the
		// group out) would overwrite each other when unpacked.
		return fmt.Errorf("two objects are named %s in the archive: %s of %s and another of the same kind, namespace and name", file, obj.GetName(), obj.GetAPIVersion())
	}
	if w.spool == nil {
		if w.spool, err = newIndexSpool(w.spoolDir); err != nil {
			return err
		}
	}
	if err := w.writeFile(file, data); err != nil {
		return err
	}
	w.names[name] = struct{}{}
	dataSum := sha256.Sum256(data)
	e := Entry{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), Group: group, File: file, SHA256: hex.EncodeToString(dataSum[:]),
	}
	if err := w.spool.add(e); err != nil {
		return err
	}
	w.objects++
	w.lastGroup = group
	w.groups = max(w.groups, group+1)
	return nil
}

// Close writes the index, with what the caller says of the backup, and
// ends the archive (and its encryption). An archive whose Close did not
// return nil is not one: a reader refuses it.
func (w *Writer) Close(about Index) error {
	defer w.Abandon()
	head := Index{Format: Format, Taken: w.taken, Source: about.Source, Namespaces: about.Namespaces,
		ClusterSelector: about.ClusterSelector, PausedBy: about.PausedBy, Groups: w.groups}
	if err := w.writeIndex(head); err != nil {
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

// Abandon frees what a Writer that will not be closed holds (its spool
// file): what it wrote is no archive. Close calls it; calling it again
// does nothing.
func (w *Writer) Abandon() {
	if w.spool != nil {
		w.spool.remove()
		w.spool = nil
	}
}

// Len is how many objects were added.
func (w *Writer) Len() int { return w.objects }

// writeIndex writes index.json: head's fields, then the spooled entries
// as its objects, the JSON an Index marshals to (indented as
// json.MarshalIndent indents it), without holding the entries: the tar
// header needs the file's size, which the spool file knows.
func (w *Writer) writeIndex(head Index) error {
	headJSON, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the archive's index: %w", err)
	}
	// head has no objects, and ends `"objects": null` and its closing
	// brace; the entries take the null's place.
	const noObjects = "\"objects\": null\n}"
	prefix, ok := bytes.CutSuffix(headJSON, []byte(noObjects))
	if !ok {
		return fmt.Errorf("encoding the archive's index: %q does not end in %q", headJSON[max(0, len(headJSON)-40):], noObjects)
	}
	var entries io.Reader = bytes.NewReader(nil)
	var size int64
	if w.spool != nil {
		if entries, size, err = w.spool.rewind(); err != nil {
			return err
		}
	}
	prefix = append(bytes.Clone(prefix), "\"objects\": ["...)
	suffix := []byte("]\n}")
	if size > 0 {
		suffix = []byte("\n  ]\n}")
	}
	hdr := &tar.Header{Name: indexFile, Mode: 0o600, Size: int64(len(prefix)) + size + int64(len(suffix)), ModTime: w.modTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := w.tar.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s to the archive: %w", indexFile, err)
	}
	if _, err := io.Copy(w.tar, io.MultiReader(bytes.NewReader(prefix), entries, bytes.NewReader(suffix))); err != nil {
		return fmt.Errorf("writing %s to the archive: %w", indexFile, err)
	}
	return nil
}

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

// indexSpool keeps an index's entries in a file as they are added: each
// on a line of its own, indented as in the index, separated by commas.
// The file holds names and hashes, never an object's content. It is
// unlinked as soon as it is made where the system allows it (only its
// descriptor holds it then), so that a backup that dies leaves nothing.
type indexSpool struct {
	f    *os.File
	buf  *bufio.Writer
	size int64
	// path is the file's name while it is still linked, else empty.
	path string
}

func newIndexSpool(dir string) (*indexSpool, error) {
	f, err := os.CreateTemp(dir, ".archive-index-*.partial")
	if err != nil {
		return nil, fmt.Errorf("making room for the archive's index: %w", err)
	}
	s := &indexSpool{f: f, buf: bufio.NewWriterSize(f, 64<<10), path: f.Name()}
	if os.Remove(f.Name()) == nil {
		s.path = ""
	}
	return s, nil
}

func (s *indexSpool) add(e Entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding the index entry of %s: %w", e, err)
	}
	sep := ",\n    "
	if s.size == 0 {
		sep = "\n    "
	}
	n, err := s.buf.WriteString(sep)
	if err == nil {
		var m int
		m, err = s.buf.Write(data)
		n += m
	}
	s.size += int64(n)
	if err != nil {
		return fmt.Errorf("spooling the archive's index: %w", err)
	}
	return nil
}

// rewind returns the spooled entries from their start, and their size.
func (s *indexSpool) rewind() (io.Reader, int64, error) {
	if err := s.buf.Flush(); err != nil {
		return nil, 0, fmt.Errorf("spooling the archive's index: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("reading the archive's index back: %w", err)
	}
	return io.LimitReader(bufio.NewReaderSize(s.f, 64<<10), s.size), s.size, nil
}

func (s *indexSpool) remove() {
	s.f.Close() //nolint:errcheck // a temporary file
	if s.path != "" {
		os.Remove(s.path) //nolint:errcheck // a temporary file
	}
}

package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"sync"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ageMagic starts every age file (its header's version line).
const ageMagic = "age-encryption.org/v1\n"

// Archive is an archive checked whole (every object its index names, each
// file as it was written) and read an object at a time: it holds its index
// and where each object's file is, never the objects, so that a restore's
// memory does not grow with the archive. Each object is read again from
// its file, and checked again against its SHA-256, when it is asked for.
type Archive struct {
	Index Index
	// Encrypted says whether the archive was encrypted.
	Encrypted bool

	// load returns the file of the entry at i of Index.Objects, as it was
	// written; decode decodes one.
	load   func(i int) ([]byte, error)
	decode func(data []byte) (*unstructured.Unstructured, error)
	// closer is what the archive was opened from, when it owns it
	// (OpenFile).
	closer io.Closer

	// byKind and byKey index the entries for Reader, built at its first
	// read: a restore reads every object by name, and a scan per read
	// made a fleet of thousands of objects take minutes.
	indexOnce sync.Once
	byKind    map[schema.GroupKind][]int
	byKey     map[objectKey]int
}

// objectKey names one object of an archive.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

// indexed returns the archive's entries (their places in Index.Objects) by
// kind and by key.
func (a *Archive) indexed() (map[schema.GroupKind][]int, map[objectKey]int) {
	a.indexOnce.Do(func() {
		a.byKind = map[schema.GroupKind][]int{}
		a.byKey = make(map[objectKey]int, len(a.Index.Objects))
		for i, e := range a.Index.Objects {
			gk := e.GroupVersionKind().GroupKind()
			a.byKind[gk] = append(a.byKind[gk], i)
			a.byKey[objectKey{gk, e.Namespace, e.Name}] = i
		}
	})
	return a.byKind, a.byKey
}

// Object reads the object of the entry at i of Index.Objects, from its
// file, checked again: a file changed since the archive was opened is an
// error wrapping ErrDamaged. The object is the caller's.
func (a *Archive) Object(i int) (*unstructured.Unstructured, error) {
	e := a.Index.Objects[i]
	data, err := a.load(i)
	if err != nil {
		return nil, fmt.Errorf("reading %s (%s) from the archive: %w", e, e.File, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != e.SHA256 {
		return nil, damaged("%s (%s) is not what was written", e, e.File)
	}
	obj, err := a.decode(data)
	if err != nil {
		return nil, damaged("%s (%s) cannot be decoded: %v", e, e.File, err)
	}
	if identityOf(obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace(), obj.GetName(), obj.GetUID()) != e.identity() {
		return nil, damaged("%s holds %s %s/%s, not %s", e.File, obj.GetKind(), obj.GetNamespace(), obj.GetName(), e)
	}
	return obj, nil
}

// All yields the archive's objects in the order they were written
// (creation order), one at a time, each read from its file as it is
// yielded; a file that can no longer be read ends it with its error.
func (a *Archive) All() iter.Seq2[*unstructured.Unstructured, error] {
	return func(yield func(*unstructured.Unstructured, error) bool) {
		for i := range a.Index.Objects {
			obj, err := a.Object(i)
			if !yield(obj, err) || err != nil {
				return
			}
		}
	}
}

// Objects returns every object of the archive, in the order they were
// written: all of them in memory at once, for a small archive (a test, a
// listing); a restore reads them one at a time (Reader, All). It returns
// nil when one can no longer be read: All says why.
func (a *Archive) Objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(a.Index.Objects))
	for obj, err := range a.All() {
		if err != nil {
			return nil
		}
		out = append(out, obj)
	}
	return out
}

// Read reads an archive from r, all of it into memory, and checks it as
// Open does: for an archive of a few objects (a test's), or one that
// cannot be read but in order. A restore opens its archive with Open,
// which holds none of it.
func Read(r io.Reader, identities ...age.Identity) (*Archive, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	return Open(bytes.NewReader(data), int64(len(data)), identities...)
}

// Open opens the archive of size bytes that r reads (a file) and checks
// it: decrypted with one of the identities when it is encrypted, every
// file against the index, nothing missing and nothing more. It reads the
// whole archive once to check it, and holds only its index: each object is
// read from r again when it is asked for, so r must stay open, and
// unchanged, while the Archive is used (an encrypted archive's chunks are
// authenticated again as they are read, an unencrypted archive's files
// hashed again). It returns an error wrapping ErrKeyRequired, ErrWrongKey,
// ErrDamaged or ErrNotArchive, that says what to do, rather than part of
// an archive.
func Open(r io.ReaderAt, size int64, identities ...age.Identity) (*Archive, error) {
	payload, payloadSize, encrypted, err := decrypt(r, size, identities)
	if err != nil {
		return nil, err
	}
	files, ix, err := scanTar(io.NewSectionReader(payload, 0, payloadSize), encrypted)
	if err != nil {
		return nil, err
	}
	a := &Archive{Index: *ix, Encrypted: encrypted, decode: decodeJSON}
	places := make([]tarFile, len(ix.Objects))
	for i, e := range ix.Objects {
		f, ok := files[e.File]
		switch {
		case !ok:
			return nil, damaged("%s (%s) is in its index and not in the archive", e, e.File)
		case hex.EncodeToString(f.sum[:]) != e.SHA256:
			return nil, damaged("%s (%s) is not what was written", e, e.File)
		case f.decodeErr != nil:
			return nil, damaged("%s (%s) cannot be decoded: %v", e, e.File, f.decodeErr)
		case f.identity != e.identity():
			return nil, damaged("%s does not hold %s", e.File, e)
		}
		delete(files, e.File)
		places[i] = f
	}
	for name := range files {
		return nil, damaged("it holds %s, which its index does not name", name)
	}
	a.load = func(i int) ([]byte, error) {
		data := make([]byte, places[i].size)
		if _, err := payload.ReadAt(data, places[i].offset); err != nil {
			if errors.Is(err, io.EOF) || encrypted {
				// age authenticates each chunk as it decrypts it.
				return nil, damaged("reading %s: %v", ix.Objects[i].File, err)
			}
			return nil, err
		}
		return data, nil
	}
	return a, nil
}

// OpenFile opens the archive in f as Open does, and owns f from then on:
// Close closes it (and so does a failure to open it).
func OpenFile(f *os.File, identities ...age.Identity) (*Archive, error) {
	info, err := f.Stat()
	if err != nil {
		f.Close() //nolint:errcheck // the error that matters is err
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	a, err := Open(f, info.Size(), identities...)
	if err != nil {
		f.Close() //nolint:errcheck // the error that matters is err
		return nil, err
	}
	a.closer = f
	return a, nil
}

// Close lets go of the file the archive reads its objects from, when it
// owns one (OpenFile): its objects can no longer be read, its index still
// can. A restore closes its archive once every object is copied; not
// while another goroutine reads it.
func (a *Archive) Close() error {
	if a.closer == nil {
		return nil
	}
	c := a.closer
	a.closer = nil
	a.load = func(int) ([]byte, error) { return nil, errors.New("the archive is closed") }
	return c.Close()
}

// decrypt returns what reads the archive's tar stream and its size, and
// whether it was encrypted.
func decrypt(r io.ReaderAt, size int64, identities []age.Identity) (io.ReaderAt, int64, bool, error) {
	head := make([]byte, len(ageMagic))
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, false, fmt.Errorf("reading the archive: %w", err)
	}
	if !bytes.Equal(head[:n], []byte(ageMagic)) {
		return r, size, false, nil
	}
	if len(identities) == 0 {
		return nil, 0, true, fmt.Errorf("%w: give the private key (an age X25519 identity, AGE-SECRET-KEY-1...) of one of the public keys it was encrypted to", ErrKeyRequired)
	}
	payload, payloadSize, err := age.DecryptReaderAt(r, size, identities...)
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, 0, true, fmt.Errorf("%w: it was encrypted to other public keys; give the private key of one of them", ErrWrongKey)
	case err != nil:
		return nil, 0, true, damaged("it cannot be decrypted (%v)", err)
	}
	return payload, payloadSize, true, nil
}

// tarFile is where an object's file is in an archive's tar stream, and
// what it was found to hold when the archive was opened.
type tarFile struct {
	offset, size int64
	sum          [sha256.Size]byte
	// identity is the object's (identityOf), or decodeErr why it has none.
	identity  [sha256.Size]byte
	decodeErr error
}

// scanTar reads the tar stream once: every object file's place, hash and
// identity, and the index, which comes last.
func scanTar(payload *io.SectionReader, encrypted bool) (map[string]tarFile, *Index, error) {
	tr := tar.NewReader(payload)
	files := map[string]tarFile{}
	var ix *Index
	for first := true; ; first = false {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if first && !encrypted {
				return nil, nil, fmt.Errorf("%w: it is neither encrypted (age) nor a tar stream (%v); name an archive a backup wrote", ErrNotArchive, err)
			}
			return nil, nil, damaged("%v", err)
		}
		_, seen := files[hdr.Name]
		if !validName(hdr.Name) || hdr.Typeflag != tar.TypeReg || seen || (hdr.Name == indexFile && ix != nil) {
			return nil, nil, fmt.Errorf("%w: it holds %q, which this format never writes; name an archive a backup wrote", ErrNotArchive, hdr.Name)
		}
		// The tar reader reads no further than a header: the stream is at
		// the file's first byte.
		offset, err := payload.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the archive: %w", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, damaged("reading %s: %v", hdr.Name, err)
		}
		if hdr.Name == indexFile {
			if ix, err = parseIndex(data); err != nil {
				return nil, nil, err
			}
			continue
		}
		f := tarFile{offset: offset, size: int64(len(data)), sum: sha256.Sum256(data)}
		f.identity, f.decodeErr = identityOfJSON(data)
		files[hdr.Name] = f
	}
	if ix == nil {
		return nil, nil, damaged("it ends before its index, which is written last")
	}
	return files, ix, nil
}

func parseIndex(data []byte) (*Index, error) {
	ix := &Index{}
	if err := json.Unmarshal(data, ix); err != nil {
		return nil, damaged("its index is not JSON (%v)", err)
	}
	if ix.Format != Format {
		return nil, fmt.Errorf("%w: its index is of format %q, and this operator reads %q; read it with the operator version that wrote it", ErrNotArchive, ix.Format, Format)
	}
	return ix, nil
}

func decodeJSON(data []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// identityOf names an object by what an index entry says of it, as a hash,
// so that an archive holds 32 bytes of each file between finding it and
// reading the index that names it.
func identityOf(apiVersion, kind, namespace, name string, uid types.UID) [sha256.Size]byte {
	return sha256.Sum256([]byte(apiVersion + "\x00" + kind + "\x00" + namespace + "\x00" + name + "\x00" + string(uid)))
}

func (e Entry) identity() [sha256.Size]byte {
	return identityOf(e.APIVersion, e.Kind, e.Namespace, e.Name, e.UID)
}

// identityOfJSON decodes what names the object of a file, and nothing
// else of it.
func identityOfJSON(data []byte) ([sha256.Size]byte, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string    `json:"namespace"`
			Name      string    `json:"name"`
			UID       types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return [sha256.Size]byte{}, err
	}
	if head.Kind == "" {
		return [sha256.Size]byte{}, errors.New("Object 'Kind' is missing")
	}
	return identityOf(head.APIVersion, head.Kind, head.Metadata.Namespace, head.Metadata.Name, head.Metadata.UID), nil
}

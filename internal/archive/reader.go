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
	"sync"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ageMagic starts every age file (its header's version line).
const ageMagic = "age-encryption.org/v1\n"

// Archive is an archive read whole and checked: every object its index
// names, each file as it was written.
type Archive struct {
	Index Index
	// Encrypted says whether the archive was encrypted.
	Encrypted bool
	objects   []*unstructured.Unstructured

	// byKind and byKey index the objects for Reader, built at its first
	// read: a restore reads every object by name, and a scan per read
	// made a fleet of thousands of objects take minutes.
	indexOnce sync.Once
	byKind    map[schema.GroupKind][]*unstructured.Unstructured
	byKey     map[objectKey]*unstructured.Unstructured
}

// objectKey names one object of an archive.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

// indexed returns the archive's objects by kind and by key.
func (a *Archive) indexed() (map[schema.GroupKind][]*unstructured.Unstructured, map[objectKey]*unstructured.Unstructured) {
	a.indexOnce.Do(func() {
		a.byKind = map[schema.GroupKind][]*unstructured.Unstructured{}
		a.byKey = make(map[objectKey]*unstructured.Unstructured, len(a.objects))
		for _, o := range a.objects {
			gk := o.GroupVersionKind().GroupKind()
			a.byKind[gk] = append(a.byKind[gk], o)
			a.byKey[objectKey{gk, o.GetNamespace(), o.GetName()}] = o
		}
	})
	return a.byKind, a.byKey
}

// Objects returns the archive's objects in the order they were written
// (creation order); the slice is the caller's, the objects are not.
func (a *Archive) Objects() []*unstructured.Unstructured {
	return append([]*unstructured.Unstructured(nil), a.objects...)
}

// Read reads an archive from r and checks it: decrypted with one of the
// identities when it is encrypted, every file against the index, nothing
// missing and nothing more. It returns an error wrapping ErrKeyRequired,
// ErrWrongKey, ErrDamaged or ErrNotArchive, that says what to do, rather
// than part of an archive.
func Read(r io.Reader, identities ...age.Identity) (*Archive, error) {
	payload, encrypted, err := decrypt(r, identities)
	if err != nil {
		return nil, err
	}
	a := &Archive{Encrypted: encrypted}
	files, ix, err := readTar(payload, encrypted)
	if err != nil {
		return nil, err
	}
	if err := a.check(files, ix); err != nil {
		return nil, err
	}
	return a, nil
}

// decrypt returns the archive's tar stream, and whether it was encrypted.
func decrypt(r io.Reader, identities []age.Identity) (io.Reader, bool, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(ageMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("reading the archive: %w", err)
	}
	if !bytes.Equal(head, []byte(ageMagic)) {
		return br, false, nil
	}
	if len(identities) == 0 {
		return nil, true, fmt.Errorf("%w: give the private key (an age X25519 identity, AGE-SECRET-KEY-1...) of one of the public keys it was encrypted to", ErrKeyRequired)
	}
	payload, err := age.Decrypt(br, identities...)
	var noMatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &noMatch):
		return nil, true, fmt.Errorf("%w: it was encrypted to other public keys; give the private key of one of them", ErrWrongKey)
	case err != nil:
		return nil, true, damaged("its encryption header cannot be read (%v)", err)
	}
	return payload, true, nil
}

// readTar reads every file of the tar stream, and the index apart.
func readTar(payload io.Reader, encrypted bool) (map[string][]byte, *Index, error) {
	tr := tar.NewReader(payload)
	files := map[string][]byte{}
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
		if !validName(hdr.Name) || hdr.Typeflag != tar.TypeReg || files[hdr.Name] != nil {
			return nil, nil, fmt.Errorf("%w: it holds %q, which this format never writes; name an archive a backup wrote", ErrNotArchive, hdr.Name)
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
		files[hdr.Name] = data
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

// check holds the files against the index, and decodes the objects.
func (a *Archive) check(files map[string][]byte, ix *Index) error {
	for _, e := range ix.Objects {
		data, ok := files[e.File]
		if !ok {
			return damaged("%s (%s) is in its index and not in the archive", e, e.File)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != e.SHA256 {
			return damaged("%s (%s) is not what was written", e, e.File)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return damaged("%s (%s) cannot be decoded: %v", e, e.File, err)
		}
		if obj.GetAPIVersion() != e.APIVersion || obj.GetKind() != e.Kind || obj.GetNamespace() != e.Namespace || obj.GetName() != e.Name || obj.GetUID() != e.UID {
			return damaged("%s holds %s %s/%s, not %s", e.File, obj.GetKind(), obj.GetNamespace(), obj.GetName(), e)
		}
		delete(files, e.File)
		a.objects = append(a.objects, obj)
	}
	for name := range files {
		return damaged("it holds %s, which its index does not name", name)
	}
	a.Index = *ix
	return nil
}

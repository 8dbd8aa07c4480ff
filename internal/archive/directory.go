package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Unpack writes a's objects to dir as clusterctl move --to-directory
// writes them (dir/objects, one file per object), and its index beside
// them (dir/index.json): `clusterctl move --from-directory dir/objects`
// restores it, and ReadDirectory(dir) reads it back. dir must not exist:
// the files are written to a directory beside it and renamed into place,
// so that a dir that exists holds a whole archive.
func Unpack(a *Archive, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: unpack into a directory that does not, so that nothing in it is overwritten", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".partial-")
	if err != nil {
		return fmt.Errorf("unpacking the archive: %w", err)
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // gone after the rename; removed on failure
	if err := os.Mkdir(filepath.Join(tmp, objectsDir), 0o700); err != nil {
		return fmt.Errorf("unpacking the archive: %w", err)
	}
	// Each file as it was written, read and checked one at a time: its
	// hash in the index holds for the unpacked file too.
	for i, e := range a.Index.Objects {
		data, err := a.load(i)
		if err != nil {
			return fmt.Errorf("reading %s from the archive: %w", e, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.SHA256 {
			return damaged("%s (%s) is not what was written", e, e.File)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.File), data, 0o600); err != nil {
			return fmt.Errorf("unpacking %s: %w", e, err)
		}
	}
	ix, err := json.MarshalIndent(a.Index, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the archive's index: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, indexFile), ix, 0o600); err != nil {
		return fmt.Errorf("unpacking the archive's index: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("unpacking the archive: %w", err)
	}
	return nil
}

// ReadDirectory reads an unpacked archive (Unpack's dir, with its index),
// or a directory clusterctl move --to-directory wrote: one object per file,
// no index, so no creation groups (every entry is of group 0) and no
// integrity beyond what decoding finds; Index.Format is empty then.
func ReadDirectory(dir string) (*Archive, error) {
	data, err := os.ReadFile(filepath.Join(dir, indexFile))
	switch {
	case err == nil:
		return readUnpacked(dir, data)
	case errors.Is(err, fs.ErrNotExist):
		return readClusterctlDirectory(dir)
	default:
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
}

// readUnpacked checks an unpacked archive's files against its index, one
// at a time, and reads each again when it is asked for.
func readUnpacked(dir string, index []byte) (*Archive, error) {
	ix, err := parseIndex(index)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(dir, objectsDir))
	if err != nil {
		return nil, fmt.Errorf("reading the objects of %s: %w", dir, err)
	}
	files := map[string]bool{}
	for _, de := range entries {
		name := objectsDir + de.Name()
		if !validName(name) || !de.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %s holds %s, which an archive never does", ErrNotArchive, dir, name)
		}
		files[name] = true
	}
	a := &Archive{Index: *ix, decode: decodeJSON, load: func(i int) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, ix.Objects[i].File))
	}}
	for i, e := range ix.Objects {
		if !files[e.File] {
			return nil, fmt.Errorf("%s: %w", dir, damaged("%s (%s) is in its index and not in the archive", e, e.File))
		}
		delete(files, e.File)
		if _, err := a.Object(i); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	for name := range files {
		return nil, fmt.Errorf("%s: %w", dir, damaged("it holds %s, which its index does not name", name))
	}
	return a, nil
}

// readClusterctlDirectory reads what clusterctl's filesToObjs reads: every
// file of dir, each a YAML or JSON object, indexed as it is read, and read
// again when it is asked for.
func readClusterctlDirectory(dir string) (*Archive, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	a := &Archive{decode: decodeYAML}
	a.load = func(i int) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, strings.TrimPrefix(a.Index.Objects[i].File, objectsDir)))
	}
	var namespaces []string
	for _, de := range entries {
		if !de.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %s holds %s, which is not a file; clusterctl's directories hold one file per object", ErrNotArchive, dir, de.Name())
		}
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", de.Name(), err)
		}
		obj, err := decodeYAML(data)
		if err != nil || obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%w: %s in %s is not a Kubernetes object (apiVersion, kind and name); name a directory clusterctl move --to-directory wrote, or one Unpack wrote", ErrNotArchive, de.Name(), dir)
		}
		sum := sha256.Sum256(data)
		a.Index.Objects = append(a.Index.Objects, Entry{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), File: objectsDir + de.Name(), SHA256: hex.EncodeToString(sum[:]),
		})
		if ns := obj.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if len(a.Index.Objects) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrNotArchive, dir)
	}
	slices.SortFunc(namespaces, strings.Compare)
	a.Index.Namespaces = namespaces
	return a, nil
}

// decodeYAML decodes a file of a directory: YAML or JSON, as clusterctl
// reads them.
func decodeYAML(data []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, err
	}
	return obj, nil
}

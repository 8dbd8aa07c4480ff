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
	for i, obj := range a.objects {
		data, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding %s: %w", a.Index.Objects[i], err)
		}
		if err := os.WriteFile(filepath.Join(tmp, a.Index.Objects[i].File), data, 0o600); err != nil {
			return fmt.Errorf("unpacking %s: %w", a.Index.Objects[i], err)
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

func readUnpacked(dir string, index []byte) (*Archive, error) {
	ix, err := parseIndex(index)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(dir, objectsDir))
	if err != nil {
		return nil, fmt.Errorf("reading the objects of %s: %w", dir, err)
	}
	files := map[string][]byte{}
	for _, de := range entries {
		name := objectsDir + de.Name()
		if !validName(name) || !de.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %s holds %s, which an archive never does", ErrNotArchive, dir, name)
		}
		if files[name], err = os.ReadFile(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	a := &Archive{}
	if err := a.check(files, ix); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return a, nil
}

// readClusterctlDirectory reads what clusterctl's filesToObjs reads: every
// file of dir, each a YAML or JSON object.
func readClusterctlDirectory(dir string) (*Archive, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	a := &Archive{}
	for _, de := range entries {
		if !de.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %s holds %s, which is not a file; clusterctl's directories hold one file per object", ErrNotArchive, dir, de.Name())
		}
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", de.Name(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil || obj.GetKind() == "" || obj.GetAPIVersion() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%w: %s in %s is not a Kubernetes object (apiVersion, kind and name); name a directory clusterctl move --to-directory wrote, or one Unpack wrote", ErrNotArchive, de.Name(), dir)
		}
		sum := sha256.Sum256(data)
		a.objects = append(a.objects, obj)
		a.Index.Objects = append(a.Index.Objects, Entry{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), File: objectsDir + de.Name(), SHA256: hex.EncodeToString(sum[:]),
		})
	}
	if len(a.objects) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrNotArchive, dir)
	}
	a.Index.Namespaces = namespacesOf(a.objects)
	return a, nil
}

// namespacesOf returns the namespaces the objects are in, sorted.
func namespacesOf(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.SortFunc(out, strings.Compare)
	return out
}

package backupstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Directory keeps archives as files in a directory (a volume mounted into
// the operator's Pod).
type Directory struct {
	Path string
}

// Put writes the archive to Path/name, through a temporary file in Path
// renamed into place: Path/name exists only whole. An archive of that name
// already there is refused, never overwritten.
func (d Directory) Put(_ context.Context, name string, write func(io.Writer) error) (Stored, error) {
	if err := checkName(name); err != nil {
		return Stored{}, err
	}
	path := filepath.Join(d.Path, name)
	if _, err := os.Stat(path); err == nil {
		return Stored{}, fmt.Errorf("%s exists: an archive is never overwritten; remove it, or name another", path)
	}
	f, digest, size, err := spool(d.Path, write)
	if err != nil {
		return Stored{}, err
	}
	defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename
	if err := f.Close(); err != nil {
		return Stored{}, fmt.Errorf("writing %s: %w", path, err)
	}
	// A hard link, not a rename: it fails when path appeared since the
	// check above, where a rename would replace it.
	if err := os.Link(f.Name(), path); err != nil {
		return Stored{}, fmt.Errorf("writing %s: %w", path, err)
	}
	return Stored{Location: path, Digest: digest, Size: size}, nil
}

// Open opens Path/ref, or ref when it is the path of a file of Path
// (what Put returned as Location); never a file elsewhere.
func (d Directory) Open(_ context.Context, ref string) (io.ReadCloser, error) {
	path := filepath.Join(d.Path, ref)
	if filepath.IsAbs(ref) {
		path = filepath.Clean(ref)
		if filepath.Dir(path) != filepath.Clean(d.Path) {
			return nil, fmt.Errorf("%s is not an archive of %s: name a file of that directory", ref, d.Path)
		}
		ref = filepath.Base(path)
	}
	if err := checkName(ref); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the archive: %w", err)
	}
	return f, nil
}

// checkName refuses a name that is not one file of the directory.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%q is not an archive's name: a file name, without a path, not starting with '.'", name)
	}
	return nil
}

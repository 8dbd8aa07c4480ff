package backupstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Stored says where a store put an archive.
type Stored struct {
	// Location is the archive's place: a file's path, or a registry
	// reference pinned by digest (registry/repository@sha256:...).
	Location string
	// Digest is the SHA-256 of the archive's bytes ("sha256:<hex>"), or,
	// in a registry, of the artifact's manifest, which pins the archive.
	Digest string
	// Size is the archive's size in bytes.
	Size int64
}

// Store keeps archives.
type Store interface {
	// Put stores the archive that write writes, under name.
	Put(ctx context.Context, name string, write func(io.Writer) error) (Stored, error)
	// Open opens a stored archive: a name Put was given, or a Location it
	// returned.
	Open(ctx context.Context, ref string) (io.ReadCloser, error)
}

// spool writes the archive to a temporary file in dir (the system's when
// empty), and returns the file, rewound, with the archive's SHA-256 and
// size. The caller removes it.
func spool(dir string, write func(io.Writer) error) (*os.File, string, int64, error) {
	f, err := os.CreateTemp(dir, ".archive-*.partial")
	if err != nil {
		return nil, "", 0, fmt.Errorf("making room for the archive: %w", err)
	}
	fail := func(err error) (*os.File, string, int64, error) {
		f.Close()           //nolint:errcheck // the error that matters is err
		os.Remove(f.Name()) //nolint:errcheck // a temporary file
		return nil, "", 0, err
	}
	h := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, h)}
	if err := write(counter); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("writing the archive: %w", err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("reading the archive back: %w", err))
	}
	return f, "sha256:" + hex.EncodeToString(h.Sum(nil)), counter.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// OpenFile opens the archive ref names in store as a file, which a reader
// reads at any offset without holding the archive (archive.Open): a
// Directory's own file, or, from any other store, a copy of what Open
// reads, in a file of spoolDir (the system's temporary directory when
// empty) removed as soon as it is made, so that only the open file holds
// it and nothing is left behind. The archive is copied as it was stored,
// encrypted when it was. The caller closes the file.
func OpenFile(ctx context.Context, store Store, ref, spoolDir string) (*os.File, int64, error) {
	rc, err := store.Open(ctx, ref)
	if err != nil {
		return nil, 0, err
	}
	if f, ok := rc.(*os.File); ok {
		info, err := f.Stat()
		if err != nil {
			f.Close() //nolint:errcheck // the error that matters is err
			return nil, 0, fmt.Errorf("opening the archive: %w", err)
		}
		return f, info.Size(), nil
	}
	defer rc.Close() //nolint:errcheck // read only
	f, err := os.CreateTemp(spoolDir, ".archive-*.read")
	if err != nil {
		return nil, 0, fmt.Errorf("making room for the archive: %w", err)
	}
	os.Remove(f.Name()) //nolint:errcheck // where the system allows it; otherwise removed below
	fail := func(err error) (*os.File, int64, error) {
		f.Close()           //nolint:errcheck // the error that matters is err
		os.Remove(f.Name()) //nolint:errcheck // a temporary file
		return nil, 0, err
	}
	size, err := io.Copy(f, rc)
	if err != nil {
		return fail(fmt.Errorf("reading the archive: %w", err))
	}
	return f, size, nil
}

package backupstore

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
)

// streamStore serves one archive as a stream, as a registry does.
type streamStore struct{ data []byte }

func (s streamStore) Put(context.Context, string, func(io.Writer) error) (Stored, error) {
	return Stored{}, nil
}

func (s streamStore) Open(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.data)), nil
}

// A restore reads its archive at any offset: a directory's file as it is,
// a registry's copied into the spool directory, which it leaves empty.
func TestAnArchiveOpensAsAFileFromEveryStore(t *testing.T) {
	ctx := context.Background()
	archive := bytes.Repeat([]byte("archive "), 10_000)
	dir := Directory{Path: t.TempDir()}
	if _, err := dir.Put(ctx, "backup-1", writeBytes(archive)); err != nil {
		t.Fatal(err)
	}
	spool := t.TempDir()
	for name, store := range map[string]Store{"directory": dir, "stream": streamStore{archive}} {
		f, size, err := OpenFile(ctx, store, "backup-1", spool)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, size)
		if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, archive) {
			t.Errorf("%s: read %d bytes back (%v), stored %d", name, size, err, len(archive))
		}
		f.Close() //nolint:errcheck // read only
		if left, _ := os.ReadDir(spool); len(left) != 0 {
			t.Errorf("%s: %d files left in the spool directory", name, len(left))
		}
	}
}

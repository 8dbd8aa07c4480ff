package backupstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

func TestADirectoryKeepsAnArchiveWholeOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := Directory{Path: dir}
	archive := bytes.Repeat([]byte("archive "), 10_000)
	stored, err := d.Put(ctx, "backup-1.tar.age", writeBytes(archive))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	if stored.Digest != "sha256:"+hex.EncodeToString(sum[:]) || stored.Size != int64(len(archive)) || stored.Location != filepath.Join(dir, "backup-1.tar.age") {
		t.Errorf("stored %+v", stored)
	}
	for _, ref := range []string{"backup-1.tar.age", stored.Location} {
		rc, err := d.Open(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close() //nolint:errcheck // read only
		if !bytes.Equal(got, archive) {
			t.Errorf("opened %s: %d bytes, stored %d", ref, len(got), len(archive))
		}
	}
	if _, err := d.Put(ctx, "backup-1.tar.age", writeBytes([]byte("other"))); err == nil {
		t.Error("an archive was stored over another of the same name")
	}
	broken := errors.New("the source went away")
	_, err = d.Put(ctx, "backup-2.tar.age", func(w io.Writer) error {
		_, _ = w.Write(archive[:1000])
		return broken
	})
	if !errors.Is(err, broken) {
		t.Errorf("a write that failed: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("after a failed write the directory holds %d files, want the one whole archive", len(entries))
	}
	for _, bad := range []string{"../x", ".hidden", "a/b", ""} {
		if _, err := d.Put(ctx, bad, writeBytes(archive)); err == nil {
			t.Errorf("stored an archive named %q", bad)
		}
	}
}

// A reference outside the directory is refused, whatever form it takes: a
// MoveOperation names it, and must not have the operator read its files.
func TestADirectoryStoreOpensNothingOutsideItsDirectory(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := Directory{Path: dir}
	for _, ref := range []string{outside, "../" + filepath.Base(filepath.Dir(outside)) + "/secret", filepath.Join(dir, "..", "x"), "/etc/hostname"} {
		if rc, err := d.Open(context.Background(), ref); err == nil {
			rc.Close()
			t.Errorf("Open(%q) opened a file outside %s", ref, dir)
		}
	}
}

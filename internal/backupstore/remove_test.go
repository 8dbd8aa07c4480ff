package backupstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory removes the archive a location names, again without error
// when it is gone, and nothing outside itself.
func TestADirectoryRemovesItsOwnArchivesOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := Directory{Path: dir}
	old, err := d.Put(ctx, "nightly-1", writeBytes([]byte("old")))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := d.Put(ctx, "nightly-2", writeBytes([]byte("kept")))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := d.Remove(ctx, old.Location); err != nil {
			t.Fatalf("removing %s: %v", old.Location, err)
		}
	}
	if _, err := os.Stat(old.Location); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", old.Location, err)
	}
	if _, err := os.Stat(kept.Location); err != nil {
		t.Errorf("the other archive went too: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, location := range []string{outside, "../" + filepath.Base(outside), ".hidden"} {
		if err := d.Remove(ctx, location); err == nil {
			t.Errorf("removing %s: no error, want a refusal", location)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("a file outside the directory was removed: %v", err)
	}
}

// A registry location is removed only when it is of the store's
// repository and pinned by digest: a tag can have moved to another push.
func TestARegistryRemovesOnlyDigestsOfItsRepository(t *testing.T) {
	o := OCI{Repository: "registry.example/fleet/backups"}
	for _, location := range []string{
		"registry.example/fleet/backups:nightly-1",
		"registry.example/other@sha256:" + strings.Repeat("a", 64),
	} {
		if err := o.Remove(context.Background(), location); err == nil {
			t.Errorf("removing %s: no error, want a refusal", location)
		}
	}
}

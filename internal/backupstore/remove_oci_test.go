//go:build cluster

package backupstore

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A real registry (CNCF Distribution, deletes enabled) removes the
// archive a pinned location names, and only it; a second removal finds
// it gone and is no error.
func TestARegistryRemovesAnArchiveByItsDigest(t *testing.T) {
	ctx := context.Background()
	r := startRegistry(t, t.TempDir())
	auth, err := AuthFromDockerConfig([]byte(`{"auths":{"`+r.Host+`":{"username":"backup","password":"s3cret"}}}`), r.Host+"/fleet/backups")
	if err != nil {
		t.Fatal(err)
	}
	store := OCI{Repository: r.Host + "/fleet/backups", Auth: auth}
	old, err := store.Put(ctx, "nightly-1", writeBytes([]byte("old archive")))
	if err != nil {
		t.Fatal(err)
	}
	kept := []byte("kept archive")
	stored, err := store.Put(ctx, "nightly-2", writeBytes(kept))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := store.Remove(ctx, old.Location); err != nil {
			t.Fatalf("removing %s: %v", old.Location, err)
		}
	}
	if _, err := store.Open(ctx, old.Location); err == nil || !strings.Contains(err.Error(), "no such archive") {
		t.Errorf("reading the removed archive: %v, want no such archive", err)
	}
	if got := read(t, store, stored.Location); !bytes.Equal(got, kept) {
		t.Errorf("the kept archive reads %q", got)
	}
}

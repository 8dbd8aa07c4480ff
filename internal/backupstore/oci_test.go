//go:build cluster

package backupstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/move-operator/move-operator/test/registry"
)

func startRegistry(t *testing.T, dir string) *registry.Registry {
	t.Helper()
	r, err := registry.Start(context.Background(), dir, registry.Options{User: "backup", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func read(t *testing.T, s Store, ref string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() //nolint:errcheck // read only
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	return b
}

// A backup pushed to a real registry (CNCF Distribution) reads back by tag,
// by digest and by the pinned location the push returned; only with the
// registry's credentials.
func TestARegistryKeepsAnArchivePinnedByDigest(t *testing.T) {
	ctx := context.Background()
	r := startRegistry(t, t.TempDir())
	auth, err := AuthFromDockerConfig([]byte(`{"auths":{"`+r.Host+`":{"username":"backup","password":"s3cret"}}}`), r.Host+"/fleet/backups")
	if err != nil {
		t.Fatal(err)
	}
	store := OCI{Repository: r.Host + "/fleet/backups", Auth: auth}
	archive := bytes.Repeat([]byte{0, 1, 2, 3, 'x'}, 300_000)
	stored, err := store.Put(ctx, "nightly-1", writeBytes(archive))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored.Digest, "sha256:") || stored.Location != r.Host+"/fleet/backups@"+stored.Digest || stored.Size != int64(len(archive)) {
		t.Errorf("stored %+v", stored)
	}
	for _, ref := range []string{"nightly-1", stored.Digest, stored.Location} {
		if got := read(t, store, ref); !bytes.Equal(got, archive) {
			t.Errorf("read %s: %d bytes, pushed %d", ref, len(got), len(archive))
		}
	}
	anonymous := OCI{Repository: store.Repository}
	if _, err := anonymous.Open(ctx, "nightly-1"); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("read without credentials: %v, want a refusal that names the credentials", err)
	}
	wrong := OCI{Repository: store.Repository, Auth: &authn.Basic{Username: "backup", Password: "wrong"}}
	if _, err := wrong.Put(ctx, "nightly-2", writeBytes(archive)); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("push with a wrong password: %v, want a refusal that names the credentials", err)
	}
	if _, err := store.Open(ctx, "nightly-9"); err == nil || !strings.Contains(err.Error(), "no such archive") {
		t.Errorf("read a tag never pushed: %v", err)
	}
}

// A changed byte in the registry's storage is found as the archive is read:
// the read ends in an error, never in other bytes.
func TestAnArchiveChangedInTheRegistryIsRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := startRegistry(t, dir)
	store := OCI{Repository: r.Host + "/fleet/backups", Auth: &authn.Basic{Username: "backup", Password: "s3cret"}}
	archive := bytes.Repeat([]byte("0123456789"), 10_000)
	stored, err := store.Put(ctx, "nightly-1", writeBytes(archive))
	if err != nil {
		t.Fatal(err)
	}
	// The layer's blob is the one file of the archive's size.
	var blob string
	_ = filepath.Walk(filepath.Join(dir, "storage"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "data" && fi.Size() == int64(len(archive)) {
			blob = p
		}
		return nil
	})
	if blob == "" {
		t.Fatal("the archive's blob is not in the registry's storage")
	}
	changed := bytes.Clone(archive)
	changed[len(changed)/2] = 'X'
	if err := os.WriteFile(blob, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := store.Open(ctx, stored.Digest)
	if err != nil {
		return // refused before a byte was read: as good
	}
	defer rc.Close() //nolint:errcheck // read only
	if got, err := io.ReadAll(rc); err == nil {
		t.Errorf("read %d bytes of a changed archive without an error", len(got))
	}
}

// dropAfter is a transport that lets n requests through and then acts as a
// registry gone away: the connection is refused.
type dropAfter struct {
	n    atomic.Int32
	stop func()
}

func (d *dropAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	if d.n.Add(-1) < 0 {
		d.stop()
		return nil, errors.New("connection refused: the registry went away")
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A registry that goes away mid-push leaves no archive: the tag names
// nothing, because the manifest is pushed last.
func TestARegistryThatGoesAwayMidPushHoldsNoArchive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := startRegistry(t, dir)
	auth := &authn.Basic{Username: "backup", Password: "s3cret"}
	drop := &dropAfter{stop: r.Stop}
	// Let the push get as far as uploading the layer, not the manifest.
	drop.n.Store(4)
	store := OCI{Repository: r.Host + "/fleet/backups", Auth: auth, Transport: drop}
	if _, err := store.Put(ctx, "nightly-1", writeBytes(bytes.Repeat([]byte("a"), 100_000))); err == nil {
		t.Fatal("a push through a registry that went away succeeded")
	}
	again := startRegistry(t, dir)
	after := OCI{Repository: again.Host + "/fleet/backups", Auth: auth}
	if _, err := after.Open(ctx, "nightly-1"); err == nil {
		t.Error("a push that did not finish left an archive under its tag")
	}
}

// A backup asks the registry whether it takes a push before it stops
// anything: the right credentials are let through, wrong ones and a
// registry that does not answer are named.
func TestARegistryIsAskedWhetherItTakesAPushBeforeTheBackup(t *testing.T) {
	ctx := context.Background()
	r := startRegistry(t, t.TempDir())
	repository := r.Host + "/fleet/backups"
	if err := (OCI{Repository: repository, Auth: &authn.Basic{Username: "backup", Password: "s3cret"}}).CheckPush(ctx); err != nil {
		t.Errorf("the registry's own credentials: %v", err)
	}
	err := (OCI{Repository: repository, Auth: &authn.Basic{Username: "backup", Password: "wrong"}}).CheckPush(ctx)
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("wrong credentials: %v, want a refusal of the credentials", err)
	}
	if strings.Contains(fmt.Sprint(err), "wrong") {
		t.Errorf("the error shows the password: %v", err)
	}
	if err := (OCI{Repository: repository}).CheckPush(ctx); err == nil {
		t.Error("an anonymous push was let through a registry that takes only its account")
	}
	r.Stop()
	if err := (OCI{Repository: repository, Auth: &authn.Basic{Username: "backup", Password: "s3cret"}}).CheckPush(ctx); err == nil {
		t.Error("a registry that is gone was said to take a push")
	}
}

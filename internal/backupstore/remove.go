package backupstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Remover is a store an archive can be removed from: what a schedule
// needs to keep only the archives of the backups it keeps.
type Remover interface {
	// Remove removes the archive at location (a Location that Put
	// returned). An archive already gone is no error: a removal that was
	// cut short is repeated.
	Remove(ctx context.Context, location string) error
}

// Remove removes the file location names, which must be an archive of
// Path (Open's rule): nothing outside the directory.
func (d Directory) Remove(_ context.Context, location string) error {
	ref := location
	if filepath.IsAbs(ref) {
		path := filepath.Clean(ref)
		if filepath.Dir(path) != filepath.Clean(d.Path) {
			return fmt.Errorf("%s is not an archive of %s: nothing outside it is removed", location, d.Path)
		}
		ref = filepath.Base(path)
	}
	if err := checkName(ref); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.Path, ref)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing archive %s: %w", location, err)
	}
	return nil
}

// Remove deletes the manifest location pins (repository@sha256:...) from
// the registry: its tag goes with it, and the registry's garbage
// collection reclaims the layer. Only a location of Repository pinned by
// digest is removed, never a tag another push may have moved.
func (o OCI) Remove(ctx context.Context, location string) error {
	ref, err := name.NewDigest(location, o.nameOptions()...)
	if err != nil {
		return fmt.Errorf("%s is not an archive's location pinned by digest (repository@sha256:...): %w", location, err)
	}
	if ref.Context().String() != repositoryName(o.Repository, o.nameOptions()...) {
		return fmt.Errorf("%s is not an archive of %s: nothing of another repository is removed", location, o.Repository)
	}
	err = remote.Delete(ref, o.remoteOptions(ctx)...)
	var terr *transport.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
		return nil
	case errors.As(err, &terr) && terr.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("removing %s: the registry does not allow deletes (HTTP 405): enable them (CNCF Distribution: storage.delete.enabled), or set the schedule's spec.archiveReclaimPolicy to Retain and prune with the registry's own retention: %w", location, err)
	}
	return registryError("removing "+location, err)
}

// repositoryName is repository as go-containerregistry names it (the
// default registry made explicit), or repository itself when it does not
// parse (and so matches no parsed reference).
func repositoryName(repository string, opts ...name.Option) string {
	r, err := name.NewRepository(repository, opts...)
	if err != nil {
		return repository
	}
	return r.String()
}

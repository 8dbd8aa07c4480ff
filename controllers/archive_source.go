package controllers

// A restore's source: the archive it reads, from the store its spec names,
// opened once per run and let go of once the copy is over.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"filippo.io/age"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backup"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/preflight"
)

// restoreOf opens the archive a restore names and returns the restore of
// it into this cluster, kept in the run: an archive is checked whole once
// (its digest, its key, every file's hash), and its objects are read from
// its file as the restore asks for them, never held all at once. A problem a
// human fixes outside the MoveOperation (a Secret) is a finding to wait
// for; a damaged archive or a wrong key fails it.
func (r *MoveOperationReconciler) restoreOf(ctx context.Context, mo *movev1alpha1.MoveOperation) (*backup.Restore, *preflight.Finding, error) {
	mem := r.memoOf(mo.UID)
	if mem.restoring != nil {
		return mem.restoring, nil, nil
	}
	src := mo.Spec.Source.Archive
	var ids []age.Identity
	if ref := src.IdentitySecretRef; ref != nil {
		data, finding, err := r.archiveSecret(ctx, mo, ref.Name, ref.KeyOrDefault(), "spec.source.archive.identitySecretRef")
		if finding != nil || err != nil {
			return nil, finding, err
		}
		if ids, err = archive.ParseIdentities(data, fmt.Sprintf("Secret %s/%s key %s", mo.Namespace, ref.Name, ref.KeyOrDefault())); err != nil {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: err.Error() +
				"; put the archive's age private keys (AGE-SECRET-KEY-1..., one per line) there (the restore waits for them)"}, nil
		}
	}
	store, finding, err := r.archiveSourceStore(ctx, mo)
	if finding != nil || err != nil {
		return nil, finding, err
	}
	a, err := readArchive(ctx, store, src.Location, r.Archives.SpoolDirectory, ids)
	var unreachable *unreachableArchive
	if errors.As(err, &unreachable) {
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveUnreadable, Retry: true, Message: fmt.Sprintf(
			"the archive %s cannot be read: %v; check spec.source.archive.location and the store (the restore waits)", src.Location, unreachable.err)}, nil
	}
	if err != nil {
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveUnreadable, Message: fmt.Sprintf(
			"the archive %s: %v; nothing was written", src.Location, err)}, nil
	}
	rs := &backup.Restore{Archive: a, Target: r.Source, Operation: string(mo.UID), Options: r.Move}
	mem.restoring = rs
	return rs, nil, nil
}

// unreachableArchive: the archive could not be opened (as opposed to
// opened and found damaged, or not for the key given).
type unreachableArchive struct{ err error }

func (u *unreachableArchive) Error() string { return u.err.Error() }

// readArchive opens the archive at location in store: an archive file or
// artifact, or, in the archive directory, a directory of one object per
// file (clusterctl move --to-directory's, or an archive unpacked). An
// artifact is copied to a file of spoolDir first, encrypted as it was
// stored. The archive reads its objects from that file, which stays open
// until the copy is over (releaseArchive).
func readArchive(ctx context.Context, store backupstore.Store, location, spoolDir string, ids []age.Identity) (*archive.Archive, error) {
	if d, ok := store.(backupstore.Directory); ok {
		path := filepath.Join(d.Path, location)
		if filepath.IsAbs(location) {
			path = filepath.Clean(location)
		}
		// Only what is in the archive directory: a MoveOperation must not
		// have the operator read files of its own.
		if filepath.Dir(path) != filepath.Clean(d.Path) {
			return nil, &unreachableArchive{fmt.Errorf("%s is not an archive of the archive directory %s: name a file or directory in it", location, d.Path)}
		}
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			return archive.ReadDirectory(path)
		}
	}
	f, _, err := backupstore.OpenFile(ctx, store, location, spoolDir)
	if err != nil {
		return nil, &unreachableArchive{err}
	}
	return archive.OpenFile(f, ids...)
}

// releaseArchive closes the archive a restore read its objects from (and
// so frees what a registry's archive took in the spool directory): the
// copy is over, and a run that needs it again, after a restart, opens it
// again.
func (r *MoveOperationReconciler) releaseArchive(_ context.Context, s *scope) (outcome, error) {
	mem := r.memoOf(s.mo.UID)
	if mem.restoring == nil {
		return done(), nil
	}
	err := mem.restoring.Archive.Close()
	mem.restoring = nil
	if err != nil {
		return outcome{}, fmt.Errorf("closing the archive: %w", err)
	}
	return done(), nil
}

// archiveSourceStore is the store a restore reads its archive from.
func (r *MoveOperationReconciler) archiveSourceStore(ctx context.Context, mo *movev1alpha1.MoveOperation) (backupstore.Store, *preflight.Finding, error) {
	src := mo.Spec.Source.Archive
	if src.Directory != nil {
		if r.Archives.Directory == "" {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveStoreUnusable, Message: "spec.source.archive.directory reads from the operator's archive directory, and it has none: " +
				"mount the volume that holds the archive in the operator's Pod and pass its path with --archive-directory (docs/disaster-recovery.md)"}, nil
		}
		return backupstore.Directory{Path: r.Archives.Directory}, nil, nil
	}
	store := backupstore.OCI{Repository: src.OCI.Repository, Insecure: src.OCI.Insecure, SpoolDir: r.Archives.SpoolDirectory, Auth: authn.Anonymous}
	if ref := src.OCI.CredentialsSecretRef; ref != nil {
		const field = "spec.source.archive.oci.credentialsSecretRef"
		data, finding, err := r.archiveSecret(ctx, mo, ref.Name, corev1.DockerConfigJsonKey, field)
		if finding != nil || err != nil {
			return nil, finding, err
		}
		auth, err := backupstore.AuthFromDockerConfig(data, src.OCI.Repository)
		if err != nil {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: fmt.Sprintf(
				"Secret %s/%s, which %s names: %v; make it a kubernetes.io/dockerconfigjson Secret with credentials for %s", mo.Namespace, ref.Name, field, err, src.OCI.Repository)}, nil
		}
		store.Auth = auth
	}
	return store, nil, nil
}

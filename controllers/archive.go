package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/preflight"
)

// Archives is where the operator keeps what backups write: the settings
// of its Deployment, not of a MoveOperation, so that a MoveOperation
// cannot point the operator at a path of its choosing.
type Archives struct {
	// Directory is the directory spec.target.archive.directory writes to
	// (a volume mounted in the operator's Pod); empty: none, and a backup
	// to a directory is refused in Validating.
	Directory string
	// SpoolDirectory is where an archive is written before it is pushed
	// to a registry (the system's temporary directory when empty).
	SpoolDirectory string
}

// archiveSecret reads a Secret a backup names, in the MoveOperation's
// namespace. A Secret that is missing, or lacks the key, is a finding a
// human fixes without changing the MoveOperation.
func (r *MoveOperationReconciler) archiveSecret(ctx context.Context, mo *movev1alpha1.MoveOperation, name, key, field string) ([]byte, *preflight.Finding, error) {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: mo.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: fmt.Sprintf(
			"Secret %s/%s, which %s names, does not exist; create it (the backup waits for it)", mo.Namespace, name, field)}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("getting Secret %s/%s (%s): %w", mo.Namespace, name, field, err)
	}
	data, ok := secret.Data[key]
	if !ok || len(data) == 0 {
		return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: fmt.Sprintf(
			"Secret %s/%s, which %s names, has no key %q; put it there (the backup waits for it)", mo.Namespace, name, field, key)}, nil
	}
	return data, nil, nil
}

// archiveEncryption is how a backup's archive is encrypted: to the public
// keys of spec.target.archive.recipientsSecretRef, or, by name only, not
// at all.
func (r *MoveOperationReconciler) archiveEncryption(ctx context.Context, mo *movev1alpha1.MoveOperation) (archive.Encryption, *preflight.Finding, error) {
	spec := mo.Spec.Target.Archive
	if spec.Unencrypted {
		return archive.Encryption{Unencrypted: true}, nil, nil
	}
	ref := spec.RecipientsSecretRef
	if ref == nil {
		// The CRD refuses this; a MoveOperation written before it was
		// installed is refused here, never written in the clear.
		return archive.Encryption{}, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Message: archive.ErrNoRecipients.Error() +
			": name a Secret of age recipients in spec.target.archive.recipientsSecretRef, or set spec.target.archive.unencrypted"}, nil
	}
	const field = "spec.target.archive.recipientsSecretRef"
	data, finding, err := r.archiveSecret(ctx, mo, ref.Name, ref.KeyOrDefault(), field)
	if finding != nil || err != nil {
		return archive.Encryption{}, finding, err
	}
	recipients, err := archive.ParseRecipients(data, fmt.Sprintf("Secret %s/%s key %s", mo.Namespace, ref.Name, ref.KeyOrDefault()))
	if err != nil {
		return archive.Encryption{}, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: err.Error() +
			"; put age X25519 public keys (age1..., one per line) there (the backup waits for them)"}, nil
	}
	return archive.Encryption{Recipients: recipients}, nil, nil
}

// archiveStore is the store a backup writes to, as its spec names it.
func (r *MoveOperationReconciler) archiveStore(ctx context.Context, mo *movev1alpha1.MoveOperation) (backupstore.Store, *preflight.Finding, error) {
	spec := mo.Spec.Target.Archive
	if spec.Directory != nil {
		if f := checkArchiveDirectory(r.Archives.Directory); f != nil {
			return nil, f, nil
		}
		return backupstore.Directory{Path: r.Archives.Directory}, nil, nil
	}
	oci := spec.OCI
	store := backupstore.OCI{Repository: oci.Repository, Insecure: oci.Insecure, SpoolDir: r.Archives.SpoolDirectory}
	if ref := oci.CredentialsSecretRef; ref != nil {
		const field = "spec.target.archive.oci.credentialsSecretRef"
		data, finding, err := r.archiveSecret(ctx, mo, ref.Name, corev1.DockerConfigJsonKey, field)
		if finding != nil || err != nil {
			return nil, finding, err
		}
		auth, err := backupstore.AuthFromDockerConfig(data, oci.Repository)
		if err != nil {
			return nil, &preflight.Finding{Reason: movev1alpha1.ReasonArchiveSecretUnusable, Retry: true, Message: fmt.Sprintf(
				"Secret %s/%s, which %s names: %v; make it a kubernetes.io/dockerconfigjson Secret with credentials for %s (kubectl create secret docker-registry)", mo.Namespace, ref.Name, field, err, oci.Repository)}, nil
		}
		store.Auth = auth
	} else {
		store.Auth = authn.Anonymous
	}
	return store, nil, nil
}

// ArchiveStoreOf is the store a backup wrote its archive to, reached as
// the backup reached it (the operator's archive directory, or the registry
// with the credentials its spec names), for a schedule that removes the
// archives of the backups it prunes.
func (r *MoveOperationReconciler) ArchiveStoreOf(ctx context.Context, mo *movev1alpha1.MoveOperation) (backupstore.Store, error) {
	if mo.Spec.Target.Archive == nil {
		return nil, fmt.Errorf("MoveOperation %s/%s is not a backup: it has no spec.target.archive", mo.Namespace, mo.Name)
	}
	store, finding, err := r.archiveStore(ctx, mo)
	if err != nil {
		return nil, err
	}
	if finding != nil {
		return nil, errors.New(finding.Message)
	}
	return store, nil
}

// checkArchiveDirectory says what is wrong with the operator's archive
// directory, if anything: a backup there is written whole or not at all,
// but a directory that is missing or read-only would fail it only once
// every controller is stopped.
func checkArchiveDirectory(dir string) *preflight.Finding {
	if dir == "" {
		return &preflight.Finding{Reason: movev1alpha1.ReasonArchiveStoreUnusable, Message: "spec.target.archive.directory writes to the operator's archive directory, and it has none: " +
			"mount a volume (a PersistentVolumeClaim) in the operator's Pod and pass its path with --archive-directory (docs/disaster-recovery.md), or back up to a registry (spec.target.archive.oci)"}
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return &preflight.Finding{Reason: movev1alpha1.ReasonArchiveStoreUnusable, Retry: true, Message: fmt.Sprintf(
			"the operator's archive directory %s cannot be written: %v; check the volume mounted there (the backup waits for it)", dir, err)}
	}
	probe.Close()           //nolint:errcheck // empty
	os.Remove(probe.Name()) //nolint:errcheck // a probe
	return nil
}

// archiveName is the name a backup stores its archive under: the
// MoveOperation's namespace and name, and its UID's first characters, so
// that two MoveOperations never share a name and a rerun of the same one
// (after a crash) writes the same.
func archiveName(mo *movev1alpha1.MoveOperation) string {
	uid := strings.ReplaceAll(string(mo.UID), "-", "")
	name := fmt.Sprintf("%s.%s.%.8s", mo.Namespace, mo.Name, uid)
	// A registry tag is at most 128 characters of [A-Za-z0-9_.-].
	if len(name) > 128 {
		name = name[len(name)-128:]
	}
	return strings.TrimLeft(name, ".-")
}

// discardPartialArchive removes, from the archive directory, what an
// earlier run of this backup stored under its name without the status
// recording it: the run died between the two. Only this backup writes
// that name, and nothing points at it.
func (r *MoveOperationReconciler) discardPartialArchive(store backupstore.Store, name string) error {
	d, ok := store.(backupstore.Directory)
	if !ok {
		return nil // a registry tag is pushed over
	}
	err := os.Remove(filepath.Join(d.Path, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the archive an earlier run left unrecorded: %w", err)
	}
	return nil
}

// checkArchive runs the checks of a backup's store and keys, before
// anything is written: what a human fixes without changing the
// MoveOperation is waited for; any other fails it.
func (r *MoveOperationReconciler) checkArchive(ctx context.Context, mo *movev1alpha1.MoveOperation) ([]preflight.Finding, error) {
	var out []preflight.Finding
	if _, f, err := r.archiveEncryption(ctx, mo); err != nil {
		return nil, err
	} else if f != nil {
		out = append(out, *f)
	}
	store, f, err := r.archiveStore(ctx, mo)
	switch {
	case err != nil:
		return nil, err
	case f != nil:
		out = append(out, *f)
	default:
		if oci, ok := store.(backupstore.OCI); ok {
			// Asked now, not found once every controller is stopped.
			if err := oci.CheckPush(ctx); err != nil {
				out = append(out, preflight.Finding{Reason: movev1alpha1.ReasonArchiveStoreUnusable, Retry: true, Message: err.Error() + " (the backup waits; nothing is stopped)"})
			}
		}
	}
	for i := range out {
		out[i].Check = "archive"
	}
	return out, nil
}

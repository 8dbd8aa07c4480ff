package controllers

// Pruning a schedule's history: its oldest backups past the limits, each
// succeeded one's archive removed first (spec.archiveReclaimPolicy).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/backupstore"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/identity"
)

// reportFailures raises a Warning event for the last backup that failed,
// once: the status remembers which one it reported.
func (r *BackupScheduleReconciler) reportFailures(bs *movev1alpha1.BackupSchedule, h history) {
	if len(h.failed) == 0 {
		return
	}
	last := h.failed[len(h.failed)-1]
	if bs.Status.LastFailedBackup == last.Name {
		return
	}
	bs.Status.LastFailedBackup = last.Name
	backupsFailed.WithLabelValues(bs.Namespace, bs.Name).Inc()
	r.Recorder.Eventf(bs, nil, "Warning", movev1alpha1.ReasonBackupFailed, "Backup",
		"backup %s failed (%s): %s", last.Name, last.Status.FailureReason, last.Status.FailureMessage)
}

// prune deletes the oldest backups past the history limits, each
// succeeded one's archive first (archiveReclaimPolicy Delete). A backup
// whose archive cannot be removed is kept, so that its status still says
// where the archive is, and reported; the next reconcile tries again, and
// backups go on being taken meanwhile.
func (r *BackupScheduleReconciler) prune(ctx context.Context, bs *movev1alpha1.BackupSchedule, h history) error {
	keep := func(list []movev1alpha1.MoveOperation, limit int32) []movev1alpha1.MoveOperation {
		if extra := len(list) - int(limit); extra > 0 {
			return list[:extra]
		}
		return nil
	}
	for _, mo := range slices.Concat(
		keep(h.succeeded, ptr.Deref(bs.Spec.SuccessfulBackupsHistoryLimit, 3)),
		keep(h.failed, ptr.Deref(bs.Spec.FailedBackupsHistoryLimit, 1))) {
		if err := r.reclaimArchive(ctx, bs, &mo); err != nil {
			log.FromContext(ctx).Error(err, "kept a backup past the history limit: its archive could not be removed", "backup", mo.Name)
			r.Recorder.Eventf(bs, &mo, "Warning", movev1alpha1.ReasonArchiveNotReclaimed, "Prune",
				"backup %s is past the history limit, and kept: its archive %s could not be removed: %v", mo.Name, mo.Status.Archive.Location, err)
			continue
		}
		if err := r.Client.Delete(ctx, &mo, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting backup %s/%s past the history limit: %w", mo.Namespace, mo.Name, err)
		}
		log.FromContext(ctx).Info("deleted a backup past the history limit", "backup", mo.Name)
	}
	return nil
}

// archiveRemovalTimeout bounds the removal of one pruned backup's archive.
const archiveRemovalTimeout = time.Minute

// reclaimArchive removes the archive of a backup the schedule prunes, as
// its archiveReclaimPolicy says: nothing for a backup that recorded none
// (a failed one discarded its own).
func (r *BackupScheduleReconciler) reclaimArchive(ctx context.Context, bs *movev1alpha1.BackupSchedule, mo *movev1alpha1.MoveOperation) error {
	if mo.Status.Archive == nil || bs.Spec.ArchiveReclaimPolicy == movev1alpha1.ArchiveReclaimRetain {
		return nil
	}
	if r.ArchiveStore == nil {
		return errors.New("the operator was started without a way to reach archive stores")
	}
	// Only an archive the schedule's own backup wrote: one the operator
	// created (the admission policy keeps anyone else from writing its
	// name as the creator), so that nobody has another's archive removed
	// by handing their MoveOperation to a schedule.
	me, err := identity.WhoAmI(ctx, r.Self)
	if err != nil {
		return err
	}
	if by, err := creator.Of(mo); err != nil || by.Name != me.Username {
		return fmt.Errorf("the schedule did not take this backup (the operator is not its creator), so its archive is left where it is; delete the MoveOperation yourself")
	}
	// A registry that does not answer holds up this schedule's pruning,
	// not its reconciles: the removal is tried again at the next one.
	ctx, cancel := context.WithTimeout(ctx, archiveRemovalTimeout)
	defer cancel()
	store, err := r.ArchiveStore(ctx, mo)
	if err != nil {
		return err
	}
	remover, ok := store.(backupstore.Remover)
	if !ok {
		return fmt.Errorf("its store cannot remove archives; set spec.archiveReclaimPolicy to Retain")
	}
	if err := remover.Remove(ctx, mo.Status.Archive.Location); err != nil {
		return err
	}
	log.FromContext(ctx).Info("removed the archive of a backup past the history limit", "backup", mo.Name, "archive", mo.Status.Archive.Location)
	return nil
}

package controllers

// The status of a BackupSchedule, written on every reconcile from its
// backups alone (history), so that it says what they say.

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// setScheduleStatus sets what the schedule's backups say: the last that
// succeeded, the one running, and the conditions kstatus reads.
func setScheduleStatus(bs *movev1alpha1.BackupSchedule, h history, now time.Time) {
	st := &bs.Status
	st.ObservedGeneration = bs.Generation
	st.Active = ""
	if h.active != nil {
		st.Active = h.active.Name
	}
	if n := len(h.succeeded); n > 0 {
		last := h.succeeded[n-1]
		if a := last.Status.Archive; a != nil {
			st.LastSuccessfulBackup = &movev1alpha1.ScheduledBackup{Name: last.Name, Location: a.Location, Digest: a.Digest, CompletionTime: last.Status.CompletionTime}
		}
	}
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: bs.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	last := h.lastEnded()
	switch {
	case st.ScheduleError != "":
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, movev1alpha1.ReasonInvalidSchedule, st.ScheduleError)
		set(movev1alpha1.StalledCondition, metav1.ConditionTrue, movev1alpha1.ReasonInvalidSchedule, st.ScheduleError)
	case last != nil && phaseOf(last) == movev1alpha1.PhaseFailed:
		msg := fmt.Sprintf("the last backup, %s, failed (%s): %s", last.Name, last.Status.FailureReason, last.Status.FailureMessage)
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, movev1alpha1.ReasonBackupFailed, msg)
		set(movev1alpha1.StalledCondition, metav1.ConditionTrue, movev1alpha1.ReasonBackupFailed, msg)
	case st.LastMissed != "" && !succeededSince(st.LastSuccessfulBackup, st.LastMissedTime):
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, movev1alpha1.ReasonBackupMissed, st.LastMissed)
		set(movev1alpha1.StalledCondition, metav1.ConditionTrue, movev1alpha1.ReasonBackupMissed, st.LastMissed)
	case st.LastSuccessfulBackup != nil:
		msg := fmt.Sprintf("the last backup, %s, is at %s", st.LastSuccessfulBackup.Name, st.LastSuccessfulBackup.Location)
		set(movev1alpha1.ReadyCondition, metav1.ConditionTrue, movev1alpha1.ReasonSucceeded, msg)
		set(movev1alpha1.StalledCondition, metav1.ConditionFalse, movev1alpha1.ReasonSucceeded, msg)
	default:
		set(movev1alpha1.ReadyCondition, metav1.ConditionFalse, movev1alpha1.ReasonProgressing, "no backup has succeeded yet")
		set(movev1alpha1.StalledCondition, metav1.ConditionFalse, movev1alpha1.ReasonProgressing, "no backup has succeeded yet")
	}
	if st.Active != "" {
		set(movev1alpha1.ReconcilingCondition, metav1.ConditionTrue, movev1alpha1.ReasonProgressing, "backup "+st.Active+" runs")
	} else {
		set(movev1alpha1.ReconcilingCondition, metav1.ConditionFalse, movev1alpha1.ReasonSucceeded, "no backup runs")
	}
}

// succeededSince reports whether a backup succeeded after a missed one
// was due: the miss is then history.
func succeededSince(b *movev1alpha1.ScheduledBackup, missed *metav1.Time) bool {
	return b != nil && b.CompletionTime != nil && missed != nil && b.CompletionTime.After(missed.Time)
}

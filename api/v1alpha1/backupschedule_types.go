package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupScheduleLabel marks the MoveOperations a BackupSchedule created
// (value: the schedule's name), as a CronJob's Jobs are marked.
const BackupScheduleLabel = "move.cluster.x-k8s.io/backup-schedule"

// ScheduledTimeAnnotation records on a scheduled backup the time it was
// due (RFC 3339), which orders a schedule's backups.
const ScheduledTimeAnnotation = "move.cluster.x-k8s.io/scheduled-time"

// BackupScheduleSpec is when backups are taken, of what, and how many
// are kept.
type BackupScheduleSpec struct {
	// schedule is when a backup is taken, in cron syntax (five fields:
	// minute, hour, day of month, month, day of week), in UTC; the
	// @hourly, @daily and @weekly forms are accepted too.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`

	// template is the spec of each backup's MoveOperation: a backup, so
	// spec.target.archive is set. Each is created in the schedule's
	// namespace, labelled with the schedule's name, and held to the
	// schedule's creator's rights.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.target) && has(self.target.archive)",message="a BackupSchedule takes backups: its template's target is an archive (spec.template.target.archive)"
	Template MoveOperationSpec `json:"template"`

	// successfulBackupsHistoryLimit is how many of the last backups that
	// succeeded are kept: their MoveOperations, and, unless
	// archiveReclaimPolicy is Retain, their archives. Default 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SuccessfulBackupsHistoryLimit *int32 `json:"successfulBackupsHistoryLimit,omitempty"`

	// archiveReclaimPolicy is what becomes of the archive of a backup that
	// succeeded when the schedule deletes it past its history limit:
	// Delete (the default) removes it from its store first, so that the
	// store holds the archives of the backups kept and no more (a registry
	// must allow deletes); Retain leaves it there, for the store's own
	// retention. Only the schedule's pruning removes archives: deleting a
	// backup's MoveOperation yourself never does.
	// +optional
	// +kubebuilder:default=Delete
	ArchiveReclaimPolicy ArchiveReclaimPolicy `json:"archiveReclaimPolicy,omitempty"`

	// failedBackupsHistoryLimit is how many of the last backups that
	// failed are kept. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailedBackupsHistoryLimit *int32 `json:"failedBackupsHistoryLimit,omitempty"`

	// startingDeadlineSeconds is how late a backup may start (the operator
	// was down, or the previous backup still ran) before its time counts
	// as missed: a Warning event, the BackupMissed condition reason and
	// the move_operator_backups_missed_total metric. Default 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// suspend stops taking backups; those running finish.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// BackupScheduleStatus is what the schedule has done.
type BackupScheduleStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready (the last backup succeeded and none was missed
	// since), Stalled (the last backup failed, or one was missed) and
	// Reconciling (a backup runs), as kstatus reads them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastScheduleTime is the time of the last backup the schedule
	// started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// lastSuccessfulBackup is the last backup that succeeded: its
	// MoveOperation and where its archive is.
	// +optional
	LastSuccessfulBackup *ScheduledBackup `json:"lastSuccessfulBackup,omitempty"`

	// active is the backup running now, if any.
	// +optional
	Active string `json:"active,omitempty"`

	// missed counts the backups whose time passed without one being
	// started within spec.startingDeadlineSeconds.
	// +optional
	Missed int32 `json:"missed,omitempty"`

	// lastMissed says why the last backup missed was not taken, and
	// lastMissedTime when it was due.
	// +optional
	LastMissed string `json:"lastMissed,omitempty"`
	// +optional
	LastMissedTime *metav1.Time `json:"lastMissedTime,omitempty"`

	// lastFailedBackup is the last backup that failed (its MoveOperation).
	// +optional
	LastFailedBackup string `json:"lastFailedBackup,omitempty"`

	// scheduleError says what is wrong with spec.schedule, if anything.
	// +optional
	ScheduleError string `json:"scheduleError,omitempty"`
}

// ScheduledBackup is one backup a schedule took.
type ScheduledBackup struct {
	// name of its MoveOperation.
	// +required
	Name string `json:"name"`
	// location of the archive, as the MoveOperation's status.archive says.
	// +required
	Location string `json:"location"`
	// digest of the archive.
	// +required
	Digest string `json:"digest"`
	// completionTime is when the backup ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// BackupSchedule takes backups (MoveOperations whose target is an archive)
// on a schedule, and keeps the last of them, as a CronJob takes and keeps
// Jobs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bs,categories=cluster-api
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Last Success",type=string,JSONPath=`.status.lastSuccessfulBackup.location`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupSchedule struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is when and what to back up.
	// +required
	Spec BackupScheduleSpec `json:"spec"`

	// status is what the schedule has done.
	// +optional
	Status BackupScheduleStatus `json:"status,omitempty,omitzero"`
}

// BackupScheduleList is a list of BackupSchedules.
//
// +kubebuilder:object:root=true
type BackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the BackupSchedules.
	Items []BackupSchedule `json:"items"`
}

// ArchiveReclaimPolicy is what becomes of a pruned backup's archive.
// +kubebuilder:validation:Enum=Delete;Retain
type ArchiveReclaimPolicy string

const (
	// ArchiveReclaimDelete removes a pruned backup's archive from its store.
	ArchiveReclaimDelete ArchiveReclaimPolicy = "Delete"
	// ArchiveReclaimRetain leaves a pruned backup's archive in its store.
	ArchiveReclaimRetain ArchiveReclaimPolicy = "Retain"
)

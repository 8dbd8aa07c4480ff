package v1alpha1

// Condition types. Ready, Reconciling and Stalled follow kstatus, so kubectl
// wait, Flux health checks and Argo CD read a MoveOperation without custom
// code; the others report one step of the move each.
const (
	// ReadyCondition is True once the move is Done, False otherwise.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while the move is making progress; absent
	// once it has ended.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the move cannot go on without a human
	// (bad input, or Failed); absent otherwise.
	StalledCondition = "Stalled"

	// ValidatedCondition reports the checks of the target, the CRDs and the
	// objects to move.
	ValidatedCondition = "Validated"
	// ControllersRecordedCondition reports that every controller's replica
	// count is recorded.
	ControllersRecordedCondition = "ControllersRecorded"
	// ControllersScaledDownCondition reports that every controller is at zero
	// in both clusters, with the moved Clusters paused and the webhook bypass
	// in place.
	ControllersScaledDownCondition = "ControllersScaledDown"
	// ObjectsCopiedCondition reports the creation of the objects in the target.
	ObjectsCopiedCondition = "ObjectsCopied"
	// ObjectsDeletedCondition reports the deletion of the moved objects from the source.
	ObjectsDeletedCondition = "ObjectsDeleted"
	// TargetRestoredCondition reports the target's controllers back up, the
	// bypass removed and the moved objects unpaused.
	TargetRestoredCondition = "TargetRestored"
	// SourceRestoredCondition reports the source's controllers back up.
	SourceRestoredCondition = "SourceRestored"
	// RolledBackCondition reports the undoing of a move that failed before the
	// point of no return.
	RolledBackCondition = "RolledBack"
)

// Condition reasons, shared by conditions, events, status.failureReason, the
// troubleshooting table of docs/troubleshooting.md and the tests.
const (
	// ReasonProgressing: the step is under way.
	ReasonProgressing = "Progressing"
	// ReasonSucceeded: the step or the move completed.
	ReasonSucceeded = "Succeeded"
	// ReasonWaitingForActiveOperation: another MoveOperation is moving this
	// source cluster; this one starts when that one has ended.
	ReasonWaitingForActiveOperation = "WaitingForActiveOperation"
	// ReasonDryRun: the plan was computed and nothing was written.
	ReasonDryRun = "DryRunCompleted"

	// ReasonTargetSecretNotFound: the kubeconfig Secret does not exist.
	ReasonTargetSecretNotFound = "TargetSecretNotFound"
	// ReasonTargetSecretKeyNotFound: the Secret lacks the kubeconfig key.
	ReasonTargetSecretKeyNotFound = "TargetSecretKeyNotFound"
	// ReasonInvalidKubeconfig: the kubeconfig cannot be parsed or uses exec
	// plugins, auth-provider plugins or file references.
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonTargetUnreachable: the target API server does not answer.
	ReasonTargetUnreachable = "TargetUnreachable"
	// ReasonTargetIsSource: the kubeconfig points at the source cluster itself.
	ReasonTargetIsSource = "TargetIsSource"
	// ReasonTargetSecretMoves: the kubeconfig Secret is one of the objects
	// the move takes (a Cluster's own kubeconfig Secret), and would be
	// deleted from the source while the move still needs the target.
	ReasonTargetSecretMoves = "TargetSecretMoves"
	// ReasonNamespaceNotFound: a namespace in spec.namespaces does not exist.
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonInvalidSelector: spec.clusterSelector or spec.controllers.selector
	// is not a valid label selector.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonCRDMismatch: a CRD to move is missing in the target, or stored
	// there at another version the operator does not convert its objects to
	// (a provider's kind, or versions Cluster API's code does not convert), or holds
	// objects in more than one stored version (status.plan.versions names
	// each kind and why).
	ReasonCRDMismatch = "CRDMismatch"
	// ReasonFieldsNotInOlderVersion: the target stores a Cluster API kind
	// at an older version than the source (a move back into an older
	// Cluster API), and objects to move hold in their spec or metadata
	// fields that version cannot hold; the message names each kind,
	// object and field.
	ReasonFieldsNotInOlderVersion = "FieldsNotInOlderVersion"
	// ReasonProviderMissing: a provider installed in the source is not
	// installed in the target, or is older there (clusterctl move's rule).
	ReasonProviderMissing = "ProviderMissing"
	// ReasonControllerNotFound: a Deployment named in
	// spec.controllers.additional does not exist in a cluster it is named for.
	ReasonControllerNotFound = "ControllerNotFound"
	// ReasonControllerRestarted: a controller the move stopped ran again
	// before the point of no return (something the move does not stop
	// scaled it up); the move is rolled back.
	ReasonControllerRestarted = "ControllerRestarted"
	// ReasonDeletionRefused: the source's admission (a policy or webhook
	// the bypass does not cover) refuses to let the move delete what it
	// moves, found with dry-run requests before the point of no return;
	// the move is rolled back.
	ReasonDeletionRefused = "DeletionRefused"
	// ReasonCopiesNotNoted: RestoringSource could not use the target for
	// longer than spec.timeouts.scaleUp, and finished without noting on
	// what the source keeps the copies the target holds (an event).
	ReasonCopiesNotNoted = "CopiesNotNoted"
	// ReasonControllerGone: a controller Deployment the move stopped was
	// deleted during the move; the restore goes on without it (an event).
	ReasonControllerGone = "ControllerGone"
	// ReasonNotProvisioned: a Cluster to move is not fully provisioned.
	ReasonNotProvisioned = "NotProvisioned"
	// ReasonOrphanedObjects: objects in the move graph have an owner that is
	// not moved.
	ReasonOrphanedObjects = "OrphanedObjects"
	// ReasonTargetConflict: an object to move already exists in the target
	// and was not created by this operation.
	ReasonTargetConflict = "TargetConflict"
	// ReasonBlockMoveTimeout: objects still carry the block-move annotation
	// when spec.timeouts.blockMove ran out.
	ReasonBlockMoveTimeout = "BlockMoveTimeout"
	// ReasonScaleDownTimeout: controller pods were still running when
	// spec.timeouts.scaleDown ran out.
	ReasonScaleDownTimeout = "ScaleDownTimeout"
	// ReasonRecordingTimeout: Recording still failed (the target could not
	// be used, a controller could not be written) when spec.timeouts.scaleDown
	// ran out.
	ReasonRecordingTimeout = "RecordingTimeout"
	// ReasonScaleUpTimeout: restored controllers were not Available when
	// spec.timeouts.scaleUp ran out.
	ReasonScaleUpTimeout = "ScaleUpTimeout"
	// ReasonCopyTimeout: copying made no progress for spec.timeouts.copy.
	ReasonCopyTimeout = "CopyTimeout"
	// ReasonCopyInterrupted: operators restarted while copying (three
	// times or more) copied no group further for spec.timeouts.copy.
	ReasonCopyInterrupted = "CopyInterrupted"
	// ReasonObjectsChanged: the set of objects to move changed while they
	// were copied (an object appeared in, or vanished from, a moved
	// hierarchy: a writer the move does not stop created or deleted it).
	ReasonObjectsChanged = "ObjectsChanged"
	// ReasonAccessDenied: the operator's identity in a cluster may not do
	// something the move does there (RBAC); the message names the cluster,
	// the verb, the resource and the ClusterRole rule that grants it. Found
	// before anything is written the move fails; met later (RBAC changed
	// during the move) it rolls back before the point of no return, and
	// waits for the rule after it.
	ReasonAccessDenied = "AccessDenied"
	// ReasonAdmissionPolicyMissing: the admission policy that checks a
	// MoveOperation's creator (or its binding) is not installed, is not
	// the one the operator ships, does not deny, or was installed after
	// the MoveOperation was created: the creator's identity on the
	// MoveOperation cannot be trusted, and the operator moves nothing.
	ReasonAdmissionPolicyMissing = "AdmissionPolicyMissing"
	// ReasonCreatorUnknown: the MoveOperation does not say who created it
	// (the created-by annotations are missing).
	ReasonCreatorUnknown = "CreatorUnknown"
	// ReasonCreatorNotAllowed: the MoveOperation's creator may not, in the
	// source, do something the move would do on their behalf (read or
	// delete a moved object, read the target's Secret, scale a controller,
	// suspend a GitOps manager); the message names the first missing right
	// (verb, resource, namespace). In Validating nothing of the move is
	// read or written; in Copying, whose plan is asked about again, the
	// move rolls back before anything is copied.
	ReasonCreatorNotAllowed = "CreatorNotAllowed"
	// ReasonGitOpsManaged: Flux or Argo CD manages objects to move and
	// spec.gitOps is Refuse; the message names the managers.
	ReasonGitOpsManaged = "GitOpsManaged"
	// ReasonDeletedBeforeCompletion: the MoveOperation was deleted before the
	// point of no return, and the move was rolled back.
	ReasonDeletedBeforeCompletion = "DeletedBeforeCompletion"
	// ReasonRollbackFailed: undoing the move hit an error; it is retried.
	ReasonRollbackFailed = "RollbackFailed"
	// ReasonFailed: the move failed; failureReason and failureMessage say why.
	ReasonFailed = "Failed"

	// Reasons of Warning events and plan warnings that do not stop a move.

	// ReasonRetrying: a step of the move failed twice in a row with the
	// same error; it is retried with a backoff of at most half a minute.
	ReasonRetrying = "Retrying"
	// ReasonBypassReapplied: the API server called, for the operator,
	// webhooks the move bypasses; the operator installed the bypass again
	// (somebody had removed it) or wrote the configuration again (the API
	// server was using it from before the bypass), and retries.
	ReasonBypassReapplied = "BypassReapplied"
	// ReasonInsecureTarget: the target kubeconfig skips TLS verification.
	ReasonInsecureTarget = "InsecureTarget"
	// ReasonGitOpsIgnored: GitOps managers of moved objects keep running
	// because spec.gitOps is Ignore.
	ReasonGitOpsIgnored = "GitOpsIgnored"
	// ReasonGitOpsSuspended: the move suspended the GitOps managers of the
	// moved objects in the source (an event, not a failure).
	ReasonGitOpsSuspended = "GitOpsSuspended"
	// ReasonGitOpsResumed: a rollback gave the GitOps managers back the
	// sync settings they had before the move.
	ReasonGitOpsResumed = "GitOpsResumed"
	// ReasonSharedIdentity: the operator's identity in a cluster is not a
	// ServiceAccount, so others may use it, and their writes skip the stopped
	// providers' webhooks during the move as the operator's do.
	ReasonSharedIdentity = "SharedIdentity"
	// ReasonIdentityChanged: the operator's identity in a cluster changed
	// during the move (the target Secret now holds another ServiceAccount's
	// credential, or the operator runs as another ServiceAccount); the
	// webhook bypass there now lets the new identity through, and no longer
	// the old one.
	ReasonIdentityChanged = "IdentityChanged"
	// ReasonTargetValidationFailed: the target's admission webhooks refused a
	// moved object in the dry-run update of spec.targetValidation.
	ReasonTargetValidationFailed = "TargetValidationFailed"
	// ReasonArchiveSecretUnusable: a Secret a backup names (its public
	// keys, its registry credentials) is missing, lacks its key, or holds
	// no usable keys or credentials.
	ReasonArchiveSecretUnusable = "ArchiveSecretUnusable"
	// ReasonArchiveStoreUnusable: the store a backup writes to cannot be
	// used: the operator has no archive directory, or cannot write it.
	ReasonArchiveStoreUnusable = "ArchiveStoreUnusable"
	// ReasonArchiveUnencrypted: a backup writes its archive in the clear,
	// as its spec asks (spec.target.archive.unencrypted): whoever reads the
	// store reads every credential of the fleet.
	ReasonArchiveUnencrypted = "ArchiveUnencrypted"
	// ReasonArchiveUnreadable: a restore's archive cannot be read: it is
	// not where spec.source.archive names it, its bytes changed or were
	// cut, or the key given does not open it.
	ReasonArchiveUnreadable = "ArchiveUnreadable"
	// ReasonArchiveNotRestorable: this cluster cannot take what the
	// archive holds: a kind or version it does not serve, objects the
	// plan would leave out, namespaces spec.namespaces does not name.
	ReasonArchiveNotRestorable = "ArchiveNotRestorable"
	// ReasonBackupFailed: the last backup a BackupSchedule took failed.
	ReasonBackupFailed = "BackupFailed"
	// ReasonBackupMissed: a BackupSchedule's backup was not taken at its
	// time: the operator was down past spec.startingDeadlineSeconds, or
	// the previous backup still ran.
	ReasonBackupMissed = "BackupMissed"
	// ReasonArchiveNotReclaimed: a BackupSchedule kept a backup past its
	// history limit because its archive could not be removed from its
	// store (a Warning event naming the archive and why).
	ReasonArchiveNotReclaimed = "ArchiveNotReclaimed"
	// ReasonInvalidSchedule: a BackupSchedule's spec.schedule is not a
	// cron schedule.
	ReasonInvalidSchedule = "InvalidSchedule"
)

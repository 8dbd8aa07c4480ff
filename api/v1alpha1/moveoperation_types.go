package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations the operator reads or writes on objects in both
// clusters. They are the operator's only memory outside the MoveOperation
// status, which is what makes a crashed move resumable.
const (
	// PlanOfLabel marks the ConfigMaps, in a MoveOperation's namespace, that
	// record its plan (value: the operation's UID): written once before the
	// first copy, they tell a restarted operator exactly which objects the
	// move takes, in which order. They are owned by the MoveOperation and go
	// with it.
	PlanOfLabel = "move.cluster.x-k8s.io/plan-of"

	// OriginalReplicasAnnotation records, on a provider controller Deployment,
	// the replica count it had before the move scaled it to zero. It is
	// written only when absent, so a resumed move never records its own zero.
	OriginalReplicasAnnotation = "move.cluster.x-k8s.io/original-replicas"

	// OriginalObjectSelectorsAnnotation saves, on a webhook configuration, the
	// objectSelector each of its bypassed webhooks had before the bypass was
	// added: a JSON object from webhook name to selector (null for none). It
	// is written in the same update as the bypass and only when absent, so a
	// restore after a crash puts back exactly what was there. One annotation
	// per configuration, because webhook names are too long to key by.
	OriginalObjectSelectorsAnnotation = "move.cluster.x-k8s.io/original-object-selectors"

	// BypassRefreshedAnnotation is written, with the time, on a webhook
	// configuration holding the operator's bypass when the API server was
	// found calling one of its bypassed webhooks for the operator anyway.
	// kube-apiserver caches what it builds of each configuration and drops
	// that cache only when the configuration changes; a change that races
	// with a rebuild can leave it serving the configuration as it was before
	// the bypass, for as long as nothing writes it again. The annotation is
	// that write. It goes when the bypass goes.
	BypassRefreshedAnnotation = "move.cluster.x-k8s.io/bypass-refreshed"

	// PausedByAnnotation records on a Cluster or ClusterClass that this
	// operator paused it (value: the operation's UID), so that it unpauses only
	// what it paused and never a pause set by somebody else.
	PausedByAnnotation = "move.cluster.x-k8s.io/paused-by"

	// CopiedToAnnotation records, on an object a completed move copied to a
	// target and kept in the source (a ClusterClass shared with Clusters
	// that stayed, say), which copy it made there and the content both had
	// (value: <target cluster ID>/<copy UID>/<content hash>), so that a later
	// move of the same object takes that copy as already made while neither
	// side has changed since.
	CopiedToAnnotation = "move.cluster.x-k8s.io/copied-to"

	// OriginalGitOpsSyncAnnotation records, on a Flux Kustomization or
	// HelmRelease or an Argo CD Application that a move suspended, what its
	// sync setting was before (spec.suspend, or spec.syncPolicy.automated)
	// and which operation changed it: a JSON object written in the same
	// update as the suspension and only when absent (or left by another
	// operation), so that a resumed move never records its own change and a
	// rollback puts back exactly what was there. It stays after a completed
	// move, telling the user what to resume.
	OriginalGitOpsSyncAnnotation = "move.cluster.x-k8s.io/original-gitops-sync"

	// CreatedByAnnotation and CreatedByGroupsAnnotation name who created a
	// MoveOperation, as the API server authenticated the request: the
	// username, and the groups joined by commas. The installer's
	// MutatingAdmissionPolicy writes both on create (Kubernetes 1.36 and
	// later); without it the creator writes them, and its
	// ValidatingAdmissionPolicy admits a MoveOperation only when they are
	// exactly the requester's and never lets them change. The operator
	// asks the source, with SubjectAccessReviews for that user, whether the
	// creator may do what the move does before it reads or writes anything
	// the move is about (docs/access.md, "Who may move").
	CreatedByAnnotation       = "move.cluster.x-k8s.io/created-by"
	CreatedByGroupsAnnotation = "move.cluster.x-k8s.io/created-by-groups"

	// MoveOperationFinalizer holds a MoveOperation until a deletion before the
	// point of no return has rolled back, or a move after it has finished.
	MoveOperationFinalizer = "move.cluster.x-k8s.io/moveoperation"

	// SecretInUseFinalizerPrefix, followed by a MoveOperation's UID, holds
	// the target kubeconfig Secret from the move's first write until it has
	// settled, so that deleting the namespace (the Secret with it) cannot
	// leave a move, or its rollback, without a way to the target.
	SecretInUseFinalizerPrefix = "move.cluster.x-k8s.io/in-use-"

	// DefaultKubeconfigSecretKey is the key of the target kubeconfig in its
	// Secret when none is given: the Cluster API convention.
	DefaultKubeconfigSecretKey = "value"

	// DefaultControllerLabel selects provider controller Deployments when
	// spec.controllers.selector is not set: clusterctl labels every provider
	// component with it.
	DefaultControllerLabel = "cluster.x-k8s.io/provider"
)

// MoveOperationSpec is what the user asks for. It is immutable once created: a
// retry, or a move with other settings, is a new MoveOperation (like a Job).
type MoveOperationSpec struct {
	// target is where the move goes: the management cluster to move to, or
	// an archive (a backup). Unset only in a restore (spec.source), whose
	// target is the cluster the MoveOperation is created in.
	// +optional
	Target TargetSpec `json:"target,omitempty,omitzero"`

	// source, when set, makes the MoveOperation a restore: the management
	// state is taken from an archive a backup (or clusterctl move
	// --to-directory) wrote, and created in the cluster the MoveOperation
	// is created in, with that cluster's controllers stopped meanwhile
	// (docs/disaster-recovery.md). Unset: the source is the cluster the
	// operator runs in.
	// +optional
	Source *SourceSpec `json:"source,omitempty"`

	// namespaces lists the source namespaces to move. Empty means every
	// namespace: the whole Cluster API management state.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// clusterSelector, when set, moves only the Clusters whose labels match it,
	// with everything they own (their hierarchies) and the shared objects they
	// need. Unset moves every Cluster in the selected namespaces.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// dryRun builds and validates the plan and reports it in status, and
	// writes nothing to either cluster.
	// +optional
	// +kubebuilder:default=false
	DryRun bool `json:"dryRun,omitempty"`

	// controllers says which Deployments are provider controllers, stopped in
	// both clusters for the duration of the move.
	// +optional
	// +kubebuilder:default={}
	Controllers ControllersSpec `json:"controllers,omitempty,omitzero"`

	// targetValidation says which moved objects the target's own admission
	// webhooks check once its providers run again, with a server-side dry-run
	// update (nothing is written): while the move copies, the stopped
	// providers' webhooks are skipped for the operator, so without this check
	// an object the target's providers refuse (another provider version, a
	// stricter policy) would go unnoticed until its controllers first write it.
	// Sample (the default) checks the first object of every kind: it finds a
	// refusal of a kind as a whole (a field the target's version rejects) at a
	// cost that does not grow with the fleet. All checks every object (about
	// as long as copying them again, without etcd writes). None skips it.
	// A refusal cannot undo a move past its point of no return: it is reported
	// as a Warning event and a plan warning naming the object and the reason.
	// +optional
	// +kubebuilder:default=Sample
	TargetValidation TargetValidation `json:"targetValidation,omitempty"`

	// gitOps says what the move does when Flux or Argo CD manages objects it
	// moves (they carry Flux's kustomize.toolkit.fluxcd.io or
	// helm.toolkit.fluxcd.io labels, or Argo CD's argocd.argoproj.io/instance
	// label or tracking-id annotation). Left running, such a manager re-creates
	// the moved objects in the source after the move, and two management
	// clusters then manage the same machines.
	// Refuse (the default) fails the move in Validating, naming the managers.
	// Suspend suspends the managing Kustomizations and HelmReleases
	// (spec.suspend) and removes automated sync from the Applications in the
	// source before the move writes anything; they stay suspended after the
	// move (point them at the target, then resume them), and are restored
	// exactly if the move rolls back.
	// Ignore moves anyway, with a warning: the user takes care of them.
	// +optional
	// +kubebuilder:default=Refuse
	GitOps GitOpsPolicy `json:"gitOps,omitempty"`

	// objectStatusPolicy says what the copies in the target start with as
	// their status. Rebuild (the default when unset, as clusterctl move does) creates them without
	// it: the target's controllers compute it again from the spec and the
	// infrastructure. Carry writes each moved object's status from the
	// source to its copy, through the status subresource, before the
	// copy's managed fields are restored and before any controller in the
	// target runs; UIDs of moved objects the status names are the copies'.
	// Providers that keep state they cannot rebuild in status need it:
	// Metal3's BareMetalHost (its provisioning state: a host that arrives
	// without it is provisioned again), Sidero's ServerBinding (its
	// addresses), ironcore's metal-operator (its claims), and Cluster API's
	// own KubeadmConfig of a MachinePool, whose bootstrap data is generated
	// again without it. It costs one write per moved object that has a
	// status (see docs/benchmarks.md). Objects found in the target (global
	// objects it already had) keep the target's status.
	// +optional
	ObjectStatusPolicy ObjectStatusPolicy `json:"objectStatusPolicy,omitempty"`

	// status is the former name of objectStatusPolicy, kept so that
	// manifests written before the rename still apply.
	// Deprecated: use objectStatusPolicy; setting both to different values
	// is refused.
	// +optional
	DeprecatedStatus ObjectStatusPolicy `json:"status,omitempty"`

	// timeouts bounds how long each wait of the move may take before the move
	// fails (and, before the point of no return, rolls back).
	// +optional
	// +kubebuilder:default={}
	// Timeouts are compared as durations, not as strings: a Go client writes
	// "5m" back as "5m0s", which is the same timeout.
	// +kubebuilder:validation:XValidation:rule="(has(self.scaleDown) == has(oldSelf.scaleDown) && (!has(self.scaleDown) || duration(self.scaleDown) == duration(oldSelf.scaleDown))) && (has(self.scaleUp) == has(oldSelf.scaleUp) && (!has(self.scaleUp) || duration(self.scaleUp) == duration(oldSelf.scaleUp))) && (has(self.blockMove) == has(oldSelf.blockMove) && (!has(self.blockMove) || duration(self.blockMove) == duration(oldSelf.blockMove))) && (has(self.copy) == has(oldSelf.copy) && (!has(self.copy) || duration(self.copy) == duration(oldSelf.copy)))",message="spec is immutable: a MoveOperation's timeouts cannot be changed once created; delete it and create a new one to move with other settings"
	Timeouts TimeoutsSpec `json:"timeouts,omitempty,omitzero"`
}

// TargetValidation says which moved objects are checked by the target's
// admission webhooks once its providers are back.
// +kubebuilder:validation:Enum=Sample;All;None
type TargetValidation string

const (
	// TargetValidationSample checks the first moved object of every kind.
	TargetValidationSample TargetValidation = "Sample"
	// TargetValidationAll checks every moved object.
	TargetValidationAll TargetValidation = "All"
	// TargetValidationNone checks nothing.
	TargetValidationNone TargetValidation = "None"
)

// ObjectStatusPolicy says whether a move carries the status of the objects
// it moves to their copies.
// +kubebuilder:validation:Enum=Rebuild;Carry
type ObjectStatusPolicy string

const (
	// ObjectStatusRebuild creates the copies without status, as clusterctl move
	// does: the target's controllers rebuild it.
	ObjectStatusRebuild ObjectStatusPolicy = "Rebuild"
	// ObjectStatusCarry writes the source's status to every copy.
	ObjectStatusCarry ObjectStatusPolicy = "Carry"
)

// GitOpsPolicy is what a move does about GitOps managers of the objects it moves.
// +kubebuilder:validation:Enum=Refuse;Suspend;Ignore
type GitOpsPolicy string

const (
	// GitOpsRefuse fails the move when GitOps manages objects it moves.
	GitOpsRefuse GitOpsPolicy = "Refuse"
	// GitOpsSuspend suspends the managers in the source for the move.
	GitOpsSuspend GitOpsPolicy = "Suspend"
	// GitOpsIgnore moves anyway, with a warning.
	GitOpsIgnore GitOpsPolicy = "Ignore"
)

// TargetSpec says where the move goes: another management cluster
// (kubeconfigSecretRef), or an archive (a backup). Exactly one.
// +kubebuilder:validation:XValidation:rule="has(self.kubeconfigSecretRef) != has(self.archive)",message="spec.target names either a cluster (kubeconfigSecretRef) or an archive (archive, a backup): set exactly one"
type TargetSpec struct {
	// kubeconfigSecretRef points at a Secret, in the MoveOperation's own
	// namespace, that holds a kubeconfig for the target cluster. The
	// kubeconfig must be self-contained: exec and auth-provider plugins and
	// references to files are refused.
	// +optional
	KubeconfigSecretRef SecretKeyReference `json:"kubeconfigSecretRef,omitempty,omitzero"`

	// archive makes the MoveOperation a backup: the source's management
	// state (the same selection, graph and statuses a move takes) is
	// written to an archive in a store, and nothing is deleted. The
	// source's controllers are stopped while the state is read, and
	// restored as a move restores them (docs/disaster-recovery.md).
	// +optional
	Archive *ArchiveTarget `json:"archive,omitempty"`
}

// IsBackup reports whether the target is an archive rather than a cluster.
func (t TargetSpec) IsBackup() bool { return t.Archive != nil }

// SecretKeyReference names one key of a Secret in the MoveOperation's namespace.
type SecretKeyReference struct {
	// name of the Secret, in the MoveOperation's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name: lower case letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`

	// key of the kubeconfig in the Secret's data. Defaults to "value", the
	// key Cluster API uses for the kubeconfig Secrets it writes.
	// +optional
	// +kubebuilder:default=value
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="must be a Secret data key: letters, digits, '-', '_' and '.'"
	Key string `json:"key,omitempty"`
}

// ControllersSpec selects the provider controller Deployments to stop.
type ControllersSpec struct {
	// selector matches the labels of the provider controller Deployments, in
	// every namespace of both clusters. Defaults to every Deployment labelled
	// cluster.x-k8s.io/provider (as clusterctl installs them). The operator's
	// own Deployment is never selected.
	// +optional
	// +kubebuilder:default={matchExpressions: {{key: "cluster.x-k8s.io/provider", operator: "Exists"}}}
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// fallbackReplicas is the replica count a controller is restored to when
	// no original count was recorded for it (its annotation was lost).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	FallbackReplicas *int32 `json:"fallbackReplicas,omitempty"`

	// additional names more Deployments to stop for the move: managers of
	// Cluster API objects or of the provider Deployments themselves (Rancher
	// Turtles, your own), which would otherwise undo what the move does.
	// Like cluster-api-operator, which the operator finds and stops by
	// itself, they are stopped before the providers and restarted after
	// them, with their replica counts recorded and restored. A Deployment
	// named here that does not exist fails the move in Validating.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Additional []AdditionalController `json:"additional,omitempty"`
}

// AdditionalController names a Deployment that manages Cluster API objects
// or provider Deployments, stopped for the duration of the move.
type AdditionalController struct {
	// cluster the Deployment runs in: Source, Target, or Both (the same
	// namespace and name in each).
	// +optional
	// +kubebuilder:default=Both
	Cluster ControllerCluster `json:"cluster,omitempty"`

	// namespace of the Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name of the Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ControllerCluster says in which of the two clusters of a move a named
// Deployment runs.
// +kubebuilder:validation:Enum=Source;Target;Both
type ControllerCluster string

const (
	// ControllerInSource is a Deployment of the source cluster only.
	ControllerInSource ControllerCluster = "Source"
	// ControllerInTarget is a Deployment of the target cluster only.
	ControllerInTarget ControllerCluster = "Target"
	// ControllerInBoth is a Deployment of the same namespace and name in
	// both clusters.
	ControllerInBoth ControllerCluster = "Both"
)

// In reports whether a Deployment named for c runs in the cluster of role.
// Empty means Both, the default.
func (c ControllerCluster) In(role ClusterRole) bool {
	switch c {
	case ControllerInSource:
		return role == ClusterSource
	case ControllerInTarget:
		return role == ClusterTarget
	}
	return true
}

// AdditionalIn returns the Deployments of spec.controllers.additional that
// run in the cluster of role.
func (c ControllersSpec) AdditionalIn(role ClusterRole) []types.NamespacedName {
	var out []types.NamespacedName
	for _, a := range c.Additional {
		if a.Cluster.In(role) {
			out = append(out, types.NamespacedName{Namespace: a.Namespace, Name: a.Name})
		}
	}
	return out
}

// TimeoutsSpec bounds the waits of a move. Each is a Go duration such as
// "90s", "5m" or "1h30m", and must be positive.
type TimeoutsSpec struct {
	// scaleDown bounds the wait for every controller pod in both clusters to
	// be gone after scaling to zero. It bounds Recording too, which writes
	// the replica counts on the controllers before they are scaled down: an
	// error that lasts longer (the target gone) rolls the move back.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 90s, 5m or 1h"
	ScaleDown *metav1.Duration `json:"scaleDown,omitempty"`

	// scaleUp bounds the wait for restored controllers to become Available.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 90s, 5m or 1h"
	ScaleUp *metav1.Duration `json:"scaleUp,omitempty"`

	// blockMove bounds the wait for every object to drop the
	// clusterctl.cluster.x-k8s.io/block-move annotation that providers set
	// while they finish work that must not be interrupted.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 90s, 5m or 1h"
	BlockMove *metav1.Duration `json:"blockMove,omitempty"`

	// copy bounds how long copying may go without progress (for example while
	// the target API server is unreachable) before the move rolls back. It
	// bounds an operator that keeps restarting while it copies, too (killed
	// out of memory, say): a restarted operator copies every group again
	// before it goes further, so once it has started Copying three times
	// without copying a group further, the move rolls back when no further
	// group was copied for this long.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration such as 90s, 5m or 1h"
	Copy *metav1.Duration `json:"copy,omitempty"`
}

// MovePhase is a step of the move's state machine.
// +kubebuilder:validation:Enum=Pending;Validating;Recording;ScalingDown;Copying;Deleting;RestoringTarget;RestoringSource;Done;RollingBack;Failed
type MovePhase string

// The phases, in the order a successful move passes through them, then the
// two of a failed one. Deleting is the point of no return: a failure before it
// rolls back, a failure after it is retried until the move completes.
const (
	// PhasePending: accepted, waiting to start (for example behind another
	// active MoveOperation of the same source cluster).
	PhasePending MovePhase = "Pending"
	// PhaseValidating: checks the target, the CRDs and the objects; writes nothing.
	PhaseValidating MovePhase = "Validating"
	// PhaseRecording: records each controller Deployment's replica count.
	PhaseRecording MovePhase = "Recording"
	// PhaseScalingDown: pauses Clusters, labels the objects to move, installs
	// the webhook bypass and scales every controller to zero in both clusters.
	PhaseScalingDown MovePhase = "ScalingDown"
	// PhaseCopying: creates the objects in the target, group by group.
	PhaseCopying MovePhase = "Copying"
	// PhaseDeleting: deletes the moved objects from the source (point of no return).
	PhaseDeleting MovePhase = "Deleting"
	// PhaseRestoringTarget: restarts the target's controllers, removes the
	// bypass and unpauses the moved Clusters; the source's providers are
	// scaled back right after the target's, so that their pods start
	// meanwhile.
	PhaseRestoringTarget MovePhase = "RestoringTarget"
	// PhaseRestoringSource: waits for the source's controllers, restarts
	// its managers, removes the bypass and unpauses what stays.
	PhaseRestoringSource MovePhase = "RestoringSource"
	// PhaseDone: the move completed.
	PhaseDone MovePhase = "Done"
	// PhaseRollingBack: undoes a move that failed before the point of no return.
	PhaseRollingBack MovePhase = "RollingBack"
	// PhaseFailed: the move failed and both clusters are as they were before it.
	PhaseFailed MovePhase = "Failed"
)

// IsTerminal reports whether a MoveOperation in this phase will not change again.
func (p MovePhase) IsTerminal() bool { return p == PhaseDone || p == PhaseFailed }

// ClusterRole says which of the two clusters of a move an entry is about.
// +kubebuilder:validation:Enum=Source;Target
type ClusterRole string

const (
	// ClusterSource is the cluster the operator runs in, moved from.
	ClusterSource ClusterRole = "Source"
	// ClusterTarget is the cluster moved to.
	ClusterTarget ClusterRole = "Target"
)

// MoveOperationStatus is what the operator observed and did.
type MoveOperationStatus struct {
	// phase is the step of the move in progress, or how it ended.
	// +optional
	Phase MovePhase `json:"phase,omitempty"`

	// observedGeneration is the generation of the spec last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions follow the Kubernetes status conventions (kstatus): Ready is
	// True once the move is Done; Reconciling is True while it progresses;
	// Stalled is True when it cannot go on without a human. Per-step
	// conditions (Validated, ControllersScaledDown, ObjectsCopied, ...) say
	// how each step went.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// startTime is when the operator started working on this move.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the move reached Done or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// phaseTransitions lists when the move entered each phase it went
	// through, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	PhaseTransitions []PhaseTransition `json:"phaseTransitions,omitempty"`

	// controllers are the Deployments stopped for the move, with the
	// replica counts they are restored to: the provider controllers, and
	// the managers of the providers (manager: true; cluster-api-operator,
	// and those named in spec.controllers.additional).
	// +optional
	// +listType=atomic
	Controllers []RecordedController `json:"controllers,omitempty"`

	// plan is what the move copies and deletes, computed in Validating.
	// +optional
	Plan *MovePlan `json:"plan,omitempty"`

	// progress counts the objects copied and deleted so far.
	// +optional
	Progress *MoveProgress `json:"progress,omitempty"`

	// archive says where a backup (spec.target.archive) wrote its archive,
	// once it is stored whole.
	// +optional
	Archive *ArchiveStatus `json:"archive,omitempty"`

	// restoredPausesOf is, in a restore, the operation whose pauses the
	// archive's objects carry (the backup's, or the restore's own for a
	// directory clusterctl wrote): recorded when the restore validates,
	// so that resuming them after a restart never needs the archive, or
	// its store, again.
	// +optional
	RestoredPausesOf string `json:"restoredPausesOf,omitempty"`

	// failureReason is a machine-readable word for why the move failed, one
	// of the reasons docs/troubleshooting.md explains.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`

	// failureMessage says, for a human, what went wrong and what to do.
	// +optional
	FailureMessage string `json:"failureMessage,omitempty"`
}

// PhaseTransition records when a move entered a phase.
type PhaseTransition struct {
	// phase entered.
	// +required
	Phase MovePhase `json:"phase"`
	// time the phase was entered.
	// +required
	Time metav1.Time `json:"time"`
}

// RecordedController is a Deployment stopped for the move: a provider
// controller, or a manager of the providers.
type RecordedController struct {
	// cluster the Deployment runs in: Source or Target.
	// +required
	Cluster ClusterRole `json:"cluster"`
	// namespace of the Deployment.
	// +required
	Namespace string `json:"namespace"`
	// name of the Deployment.
	// +required
	Name string `json:"name"`
	// originalReplicas is the replica count the Deployment had before the
	// move, and is restored to after it.
	// +required
	// +kubebuilder:validation:Minimum=0
	OriginalReplicas int32 `json:"originalReplicas"`
	// manager is true for a Deployment that manages the providers or their
	// objects (cluster-api-operator, or one named in
	// spec.controllers.additional): it is stopped before the providers and
	// restarted after them, so that it cannot start a provider the move
	// has stopped.
	// +optional
	Manager bool `json:"manager,omitempty"`
}

// MovePlan summarises what a move copies and deletes.
type MovePlan struct {
	// objects is how many objects the move copies to the target.
	// +optional
	Objects int32 `json:"objects"`
	// groups is how many creation groups the objects fall into: an object is
	// created only after every object that owns it.
	// +optional
	Groups int32 `json:"groups"`
	// kinds counts the objects to move per kind.
	// +optional
	// +listType=atomic
	Kinds []KindCount `json:"kinds,omitempty"`
	// warnings are things the user should know that do not stop the move,
	// for example webhooks given by URL that cannot be bypassed, or global
	// objects that are copied but not deleted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Warnings []string `json:"warnings,omitempty"`
	// excluded says what the move leaves in the source, per reason: objects
	// in the moved namespaces that no moved hierarchy holds
	// (NotInHierarchy), that the cluster selector leaves out (NotSelected),
	// or that cannot move because an owner does not move (OwnerNotMoved) or
	// does not exist (OwnerMissing). The last two stop the move.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Excluded []ExclusionCount `json:"excluded,omitempty"`
	// gitOps reports the Flux Kustomizations and HelmReleases and Argo CD
	// Applications that manage moved objects, and what the move does about
	// them (spec.gitOps). Absent when no moved object is GitOps-managed.
	// +optional
	GitOps *GitOpsReport `json:"gitOps,omitempty"`
	// versions lists, for each kind of Cluster API and its providers that
	// the move considers (every CRD labelled for clusterctl in the source),
	// the version the source stores it at, the version the target stores
	// it at, and how its objects get from the one to the other. The move
	// reads and writes objects only at these storage versions: the target's
	// conversion webhooks are served by the controllers the move stops. A
	// kind the target cannot take says why (refusal), and the move fails in
	// Validating, before any controller is stopped; failureMessage says what
	// to install. Decided once, in Validating: Copying writes every object
	// at the target's version listed here. For a restore, source is the
	// version the archive holds the kind in.
	// +optional
	// +listType=atomic
	Versions []KindVersion `json:"versions,omitempty"`
}

// KindVersion is the version each cluster stores one kind at, and how a
// move gets the kind's objects from the source's version to the target's.
type KindVersion struct {
	// kind, qualified by API group (for example "Cluster.cluster.x-k8s.io").
	// +required
	Kind string `json:"kind"`
	// source is the version the source stores the kind at.
	// +required
	Source string `json:"source"`
	// target is the version the target stores the kind at; empty when the
	// target does not serve the kind.
	// +optional
	Target string `json:"target,omitempty"`
	// conversion is how the kind's objects reach the target's version:
	// None when both clusters store the kind at one version; ToNewer when
	// the target stores a newer version of a Cluster API kind (an older
	// Cluster API moved into a newer one), and the operator converts each
	// object with Cluster API's own conversion code, statuses included;
	// ToOlder when the target stores an older version of a Cluster API kind
	// (a newer Cluster API moved back into an older one), converted the
	// same way, and the move is refused before anything stops when an
	// object holds in its spec or metadata what the older version cannot.
	// Empty when the target cannot take the kind.
	// +optional
	Conversion KindConversion `json:"conversion,omitempty"`
	// refusal says why the target cannot take the kind: NotInTarget (the
	// target does not serve it), OlderInTarget or NewerInTarget (the
	// target stores another version and the operator does not convert
	// between the two: a provider's kinds convert only in their provider),
	// or StoredAtOtherVersions (a cluster still holds objects of the kind
	// stored at another version than its storage version). Empty when the
	// target can take it.
	// +optional
	Refusal KindRefusal `json:"refusal,omitempty"`
}

// KindConversion is how a move gets the objects of one kind from the
// version the source stores them at to the version the target does.
// +kubebuilder:validation:Enum=None;ToNewer;ToOlder
type KindConversion string

const (
	// ConversionNone: both clusters store the kind at the same version.
	ConversionNone KindConversion = "None"
	// ConversionToNewer: the target stores a newer version of a Cluster
	// API kind, and the operator converts each object with Cluster API's
	// own conversion code.
	ConversionToNewer KindConversion = "ToNewer"
	// ConversionToOlder: the target stores an older version of a Cluster
	// API kind, and the operator converts each object back with Cluster
	// API's own conversion code, once no object holds in its spec or
	// metadata a field the older version cannot hold.
	ConversionToOlder KindConversion = "ToOlder"
)

// KindRefusal is why a target cannot take the objects of one kind.
// +kubebuilder:validation:Enum=NotInTarget;OlderInTarget;NewerInTarget;StoredAtOtherVersions
type KindRefusal string

const (
	// RefusalNotInTarget: the target does not serve the kind at all.
	RefusalNotInTarget KindRefusal = "NotInTarget"
	// RefusalOlderInTarget: the target stores an older version than the
	// source, and the operator does not convert the kind's objects to it
	// (a provider's kind, or versions Cluster API's code does not convert).
	RefusalOlderInTarget KindRefusal = "OlderInTarget"
	// RefusalNewerInTarget: the target stores a newer version than the
	// source, and the operator has no conversion between the two.
	RefusalNewerInTarget KindRefusal = "NewerInTarget"
	// RefusalStoredAtOtherVersions: a cluster still has objects of the kind
	// stored at another version than its storage version; reading them at
	// the storage version needs that cluster's conversion webhook.
	RefusalStoredAtOtherVersions KindRefusal = "StoredAtOtherVersions"
)

// GitOpsReport counts the GitOps managers of the moved objects and names the
// first of them.
type GitOpsReport struct {
	// managers is how many managing objects were found.
	// +required
	Managers int32 `json:"managers"`
	// managedObjects is how many moved objects a GitOps tool manages.
	// +required
	ManagedObjects int32 `json:"managedObjects"`
	// items are the first managers (at most 50), sorted by kind, namespace
	// and name. When managers is larger, the move finds the others again
	// from the objects' labels.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Items []GitOpsManager `json:"items,omitempty"`
}

// GitOpsManager is one Flux Kustomization, Flux HelmRelease or Argo CD
// Application that manages moved objects.
type GitOpsManager struct {
	// kind of the manager, qualified by API group (for example
	// "Kustomization.kustomize.toolkit.fluxcd.io").
	// +required
	Kind string `json:"kind"`
	// namespace of the manager; empty for an Argo CD Application that was
	// not found (its objects name it without a namespace).
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the manager.
	// +required
	Name string `json:"name"`
	// objects is how many moved objects it manages itself.
	// +required
	Objects int32 `json:"objects"`
	// manages names the managers of moved objects that it applies, for a
	// manager of managers: an Argo CD app of apps, or whatever applies an
	// Application (it would put back the automated sync policy that a
	// suspension removes). At most 10, as "Kind.group namespace/name".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Manages []string `json:"manages,omitempty"`
	// state is what the manager does: Reconciling (it applies its source
	// by itself), Suspended (it was suspended before the move, by its
	// user), SuspendedForMove (this move suspended it), or NotFound (the
	// objects name a manager that is not in the source cluster: gone, or
	// running in another cluster, where only its user can suspend it).
	// +required
	State GitOpsManagerState `json:"state"`
}

// GitOpsManagerState is what a GitOps manager does.
// +kubebuilder:validation:Enum=Reconciling;Suspended;SuspendedForMove;NotFound
type GitOpsManagerState string

// The states of a GitOps manager.
const (
	// GitOpsReconciling: the manager applies its source by itself.
	GitOpsReconciling GitOpsManagerState = "Reconciling"
	// GitOpsSuspended: its user had suspended it before the move.
	GitOpsSuspended GitOpsManagerState = "Suspended"
	// GitOpsSuspendedForMove: this move suspended it.
	GitOpsSuspendedForMove GitOpsManagerState = "SuspendedForMove"
	// GitOpsNotFound: no such manager in the source cluster.
	GitOpsNotFound GitOpsManagerState = "NotFound"
)

// ExclusionCount is how many objects a move leaves in the source for one
// reason, with the first of them.
type ExclusionCount struct {
	// reason the objects stay: NotInHierarchy, NotSelected, OwnerNotMoved
	// or OwnerMissing.
	// +required
	Reason string `json:"reason"`
	// count of the objects that stay for this reason.
	// +required
	Count int32 `json:"count"`
	// objects are the first of them (at most 10), each with why it stays.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Objects []string `json:"objects,omitempty"`
}

// KindCount is how many objects of one kind a move takes.
type KindCount struct {
	// kind of the objects, qualified by API group (for example
	// "Cluster.cluster.x-k8s.io"; core kinds such as "Secret" stand alone).
	// +required
	Kind string `json:"kind"`
	// count of objects of that kind.
	// +required
	Count int32 `json:"count"`
}

// MoveProgress counts what the move has done so far. It is written after each
// creation or deletion group, not after each object.
type MoveProgress struct {
	// total is the number of objects the move copies.
	// +optional
	Total int32 `json:"total"`
	// copied is the number of objects present in the target.
	// +optional
	Copied int32 `json:"copied"`
	// deleted is the number of objects removed from the source.
	// +optional
	Deleted int32 `json:"deleted"`
	// copiedGroups is how many creation groups are copied.
	// +optional
	CopiedGroups int32 `json:"copiedGroups,omitempty"`
	// deletedGroups is how many creation groups are deleted from the source
	// (deletion goes in reverse order).
	// +optional
	DeletedGroups int32 `json:"deletedGroups,omitempty"`
	// lastProgressTime is when the move last copied a group further than
	// before, or deleted a group; the copy timeout counts from it.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// copyStarts is how many times an operator started Copying since a
	// group was last copied further than before (1: the copy has not been
	// interrupted since). A restarted operator copies every group again
	// before it goes further; see spec.timeouts.copy.
	// +optional
	CopyStarts int32 `json:"copyStarts,omitempty"`
	// summary is the progress of the current step as "done/total", the
	// Progress column of kubectl get moveoperations.
	// +optional
	Summary string `json:"summary,omitempty"`
}

// MoveOperation moves Cluster API management state from the cluster the
// operator runs in to a target cluster, with every provider controller stopped
// in both clusters for the duration of the move.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mo,categories=cluster-api
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="The step of the move in progress, or how it ended"
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.kubeconfigSecretRef.name`,description="The Secret holding the target cluster's kubeconfig"
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,description="Objects done out of the step's total"
// +kubebuilder:printcolumn:name="Archive",type=string,JSONPath=`.status.archive.location`,priority=1,description="Where a backup wrote its archive"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MoveOperation struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the move asked for. It cannot be changed once created.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.objectStatusPolicy) || self.status == self.objectStatusPolicy",message="spec.status is the former name of spec.objectStatusPolicy and the two differ: set only spec.objectStatusPolicy (Rebuild or Carry)"
	// +kubebuilder:validation:XValidation:rule="has(self.target) != has(self.source)",message="a MoveOperation either moves the cluster it is in to spec.target (a cluster, or an archive for a backup), or restores an archive named in spec.source into the cluster it is in: set exactly one of spec.target and spec.source"
	// +kubebuilder:validation:XValidation:rule="has(self.target) == has(oldSelf.target) && (!has(self.target) || self.target == oldSelf.target) && has(self.source) == has(oldSelf.source) && (!has(self.source) || self.source == oldSelf.source) && self.dryRun == oldSelf.dryRun && self.controllers == oldSelf.controllers && has(self.namespaces) == has(oldSelf.namespaces) && (!has(self.namespaces) || self.namespaces == oldSelf.namespaces) && has(self.clusterSelector) == has(oldSelf.clusterSelector) && (!has(self.clusterSelector) || self.clusterSelector == oldSelf.clusterSelector) && has(self.targetValidation) == has(oldSelf.targetValidation) && (!has(self.targetValidation) || self.targetValidation == oldSelf.targetValidation) && has(self.gitOps) == has(oldSelf.gitOps) && (!has(self.gitOps) || self.gitOps == oldSelf.gitOps) && has(self.objectStatusPolicy) == has(oldSelf.objectStatusPolicy) && (!has(self.objectStatusPolicy) || self.objectStatusPolicy == oldSelf.objectStatusPolicy) && has(self.status) == has(oldSelf.status) && (!has(self.status) || self.status == oldSelf.status)",message="spec is immutable: a MoveOperation cannot be changed once created; delete it and create a new one to move with other settings"
	Spec MoveOperationSpec `json:"spec"`

	// status is what the operator observed and did.
	// +optional
	Status MoveOperationStatus `json:"status,omitempty,omitzero"`
}

// MoveOperationList is a list of MoveOperations.
//
// +kubebuilder:object:root=true
type MoveOperationList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the MoveOperations.
	Items []MoveOperation `json:"items"`
}

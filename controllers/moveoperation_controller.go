package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
)

// MoveOperationReconciler drives MoveOperations through their phases.
//
// It keeps nothing in memory that a move needs in order to continue: the
// MoveOperation's status, the annotations on Deployments and webhook
// configurations and the labels on moved objects are the only memory. The
// plans it caches between reconciles are rebuilt from the clusters after a
// restart.
type MoveOperationReconciler struct {
	// Client reads MoveOperations (from the manager's cache) and writes them.
	Client client.Client
	// Source reads and writes the source cluster directly, without a cache:
	// a move reads each object once, and a cache would hold every object of
	// every kind in memory.
	Source client.Client
	// APIReader reads Secrets without a cache, so the operator needs only
	// "get" on the Secrets it is pointed at.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// Targets builds and caches target clients from kubeconfig Secrets.
	Targets *remote.Clients
	// Self is the operator's own Deployment, never scaled down, even when it
	// matches the controllers selector.
	Self types.NamespacedName
	// Move tunes the engine's bulk operations (requests in flight).
	Move move.Options
	// PollInterval is how often a wait (for pods, for block-move) looks again.
	PollInterval time.Duration

	// runs caches, per MoveOperation UID, what is costly to rebuild on every
	// reconcile (the plan, the copier). Losing it costs time, never safety.
	runs sync.Map
}

// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Secrets and ConfigMaps of the moved hierarchies (the cluster Secrets, the
// ClusterResourceSet resources) move with them, so they are listed and
// deleted; the target kubeconfig Secret is read with a plain GET.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;patch;update;delete
//
// What a move does to the source cluster: it scales provider controllers,
// patches webhook selectors, and copies, labels, pauses and deletes the
// Cluster API objects (any CRD labelled clusterctl.cluster.x-k8s.io, plus
// the Secrets and ConfigMaps of the moved hierarchies).
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;patch;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list
// +kubebuilder:rbac:groups=cluster.x-k8s.io;infrastructure.cluster.x-k8s.io;bootstrap.cluster.x-k8s.io;controlplane.cluster.x-k8s.io;addons.cluster.x-k8s.io;ipam.cluster.x-k8s.io;runtime.cluster.x-k8s.io,resources=*,verbs=get;list;patch;update;delete
// +kubebuilder:rbac:groups=clusterctl.cluster.x-k8s.io,resources=providers,verbs=get;list

// SetupWithManager registers the reconciler with the manager.
func (r *MoveOperationReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	if r.PollInterval == 0 {
		// Every provider stays stopped while the move waits for pods to go
		// or to become Available: a second between looks costs a few cheap
		// reads and keeps those waits short.
		r.PollInterval = time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&movev1alpha1.MoveOperation{}).
		WithOptions(options).
		Complete(r)
}

// Reconcile moves a MoveOperation one durable step forward, then writes its
// status, so that a restarted operator re-enters the step it was in.
func (r *MoveOperationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mo := &movev1alpha1.MoveOperation{}
	if err := r.Client.Get(ctx, req.NamespacedName, mo); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting MoveOperation %s: %w", req.NamespacedName, err)
	}
	logger := log.FromContext(ctx).WithValues("phase", phaseOf(mo))
	ctx = log.IntoContext(ctx, logger)

	// Without the finalizer, a deletion before the point of no return could
	// not roll back. Add it before anything else, and reconcile again.
	if mo.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(mo, movev1alpha1.MoveOperationFinalizer) {
		patch := client.MergeFrom(mo.DeepCopy())
		controllerutil.AddFinalizer(mo, movev1alpha1.MoveOperationFinalizer)
		if err := r.Client.Patch(ctx, mo, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer to MoveOperation %s: %w", req.NamespacedName, err)
		}
		// The patch is an update event: the next reconcile follows it.
		return ctrl.Result{}, nil
	}

	s := newScope(mo)
	defer func() {
		setConditions(s, time.Now())
		if retErr == nil {
			mo.Status.ObservedGeneration = mo.Generation
		}
		if err := r.patchStatus(ctx, s); err != nil {
			if apierrors.IsConflict(err) && retErr == nil {
				// This reconcile started from a stale copy; its step is
				// idempotent, so the next one simply does it again.
				logger.V(1).Info("status changed meanwhile, reconciling again")
				res = ctrl.Result{RequeueAfter: 100 * time.Millisecond}
				return
			}
			retErr = kerrors.NewAggregate([]error{retErr, err})
			return
		}
		r.recordTransitions(ctx, s)
		if s.removeFinalizer {
			if err := r.removeFinalizer(ctx, mo); err != nil {
				retErr = kerrors.NewAggregate([]error{retErr, err})
			}
		}
	}()

	if !mo.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcilePhase(ctx, s)
}

// reconcileDelete handles a MoveOperation being deleted: before the point of
// no return the move rolls back, after it the move finishes; only then does
// the finalizer go.
func (r *MoveOperationReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	mo := s.mo
	switch phaseOf(mo) {
	case movev1alpha1.PhasePending, movev1alpha1.PhaseValidating, movev1alpha1.PhaseDone, movev1alpha1.PhaseFailed:
		// Nothing written yet, or the move has settled.
		s.removeFinalizer = true
		r.runs.Delete(mo.UID)
		return ctrl.Result{}, nil
	case movev1alpha1.PhaseRecording, movev1alpha1.PhaseScalingDown, movev1alpha1.PhaseCopying:
		s.fail(movev1alpha1.ReasonDeletedBeforeCompletion,
			"the MoveOperation was deleted before the point of no return; the move is rolled back and both clusters are left as they were")
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	// RollingBack, or after the point of no return: finish first.
	return r.reconcilePhase(ctx, s)
}

func (r *MoveOperationReconciler) removeFinalizer(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if !controllerutil.ContainsFinalizer(mo, movev1alpha1.MoveOperationFinalizer) {
		return nil
	}
	patch := client.MergeFrom(mo.DeepCopy())
	controllerutil.RemoveFinalizer(mo, movev1alpha1.MoveOperationFinalizer)
	if err := r.Client.Patch(ctx, mo, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	return nil
}

// patchStatus writes the status with an optimistic lock: a reconcile that
// started from a stale copy must not write an older phase over a newer one.
func (r *MoveOperationReconciler) patchStatus(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.base.Status, s.mo.Status) {
		return nil // nothing new: polling reconciles write nothing
	}
	patch := client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, s.mo, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status of MoveOperation %s/%s: %w", s.mo.Namespace, s.mo.Name, err)
	}
	return nil
}

// recordTransitions emits one event per phase entered in this reconcile and
// updates the metrics, once the new phase is durable.
func (r *MoveOperationReconciler) recordTransitions(ctx context.Context, s *scope) {
	for _, t := range s.transitions {
		observeTransition(s.mo, t.from, t.to, t.at)
		eventType, reason := "Normal", string(t.to)
		note := fmt.Sprintf("phase %s", t.to)
		if t.to == movev1alpha1.PhaseRollingBack || t.to == movev1alpha1.PhaseFailed {
			eventType, reason = "Warning", s.mo.Status.FailureReason
			note = fmt.Sprintf("phase %s: %s", t.to, s.mo.Status.FailureMessage)
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(s.mo, nil, eventType, reason, string(t.to), "%s", note)
		}
		log.FromContext(ctx).Info("entered phase", "from", t.from, "to", t.to)
	}
}

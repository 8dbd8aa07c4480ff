package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// ReasonMoveNotImplemented says that this build accepts MoveOperations but
// does not move anything yet: the phase state machine is still being built.
// It is honest rather than silent, so a user who applies a MoveOperation to
// this build sees why nothing happens.
const ReasonMoveNotImplemented = "MoveNotImplemented"

// MoveOperationReconciler reconciles MoveOperation objects.
type MoveOperationReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with the manager.
func (r *MoveOperationReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&movev1alpha1.MoveOperation{}).
		WithOptions(options).
		Complete(r)
}

// Reconcile accepts a MoveOperation and reports that moving is not built yet.
// The phase state machine replaces this body; until then it writes nothing
// to any cluster but the MoveOperation's own status.
func (r *MoveOperationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)

	mo := &movev1alpha1.MoveOperation{}
	if err := r.Client.Get(ctx, req.NamespacedName, mo); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting MoveOperation %s: %w", req.NamespacedName, err)
	}
	if mo.Status.ObservedGeneration == mo.Generation && mo.Status.Phase != "" {
		return ctrl.Result{}, nil
	}

	base := mo.DeepCopy()
	mo.Status.Phase = movev1alpha1.PhasePending
	mo.Status.ObservedGeneration = mo.Generation
	meta.SetStatusCondition(&mo.Status.Conditions, metav1.Condition{
		Type:               movev1alpha1.ReadyCondition,
		Status:             metav1.ConditionFalse,
		Reason:             ReasonMoveNotImplemented,
		Message:            "this build of move-operator accepts MoveOperations but does not move yet; nothing was changed in either cluster",
		ObservedGeneration: mo.Generation,
	})
	if err := r.Client.Status().Patch(ctx, mo, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching status of MoveOperation %s: %w", req.NamespacedName, err)
	}
	logger.Info("accepted MoveOperation; moving is not implemented in this build")
	return ctrl.Result{}, nil
}

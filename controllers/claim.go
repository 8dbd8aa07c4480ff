package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/claim"
)

// claimLock is the claim on the source cluster.
func (r *MoveOperationReconciler) claimLock() claim.Lock {
	return claim.Lock{Client: r.Source, Key: r.Claim}
}

func holderOf(mo *movev1alpha1.MoveOperation) claim.Holder {
	return claim.Holder{Namespace: mo.Namespace, Name: mo.Name, UID: mo.UID}
}

// acquireClaim takes the claim on the source cluster for mo, and returns who
// holds it: mo itself when it may move.
func (r *MoveOperationReconciler) acquireClaim(ctx context.Context, mo *movev1alpha1.MoveOperation) (claim.Holder, error) {
	return r.claimLock().Acquire(ctx, holderOf(mo), r.stillMoving)
}

// release lets go of what a move holds while it runs: the claim on the
// source cluster and the target Secret.
func (r *MoveOperationReconciler) release(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if err := r.releaseSecret(ctx, mo); err != nil {
		return err
	}
	return r.releaseClaim(ctx, mo)
}

// holdSecret puts mo's finalizer on its target kubeconfig Secret.
func (r *MoveOperationReconciler) holdSecret(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	return r.setSecretFinalizer(ctx, mo, true)
}

// releaseSecret takes mo's finalizer off its target kubeconfig Secret.
func (r *MoveOperationReconciler) releaseSecret(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if mo.Spec.DryRun {
		return nil
	}
	return r.setSecretFinalizer(ctx, mo, false)
}

func (r *MoveOperationReconciler) setSecretFinalizer(ctx context.Context, mo *movev1alpha1.MoveOperation, hold bool) error {
	if mo.Spec.Target.IsBackup() || mo.Spec.IsRestore() {
		return nil // no kubeconfig to hold
	}
	key := types.NamespacedName{Namespace: mo.Namespace, Name: mo.Spec.Target.KubeconfigSecretRef.Name}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // nothing to hold (Validating waits for it) or release
		}
		return fmt.Errorf("getting target kubeconfig Secret %s: %w", key, err)
	}
	finalizer := movev1alpha1.SecretInUseFinalizerPrefix + string(mo.UID)
	if controllerutil.ContainsFinalizer(secret, finalizer) == hold {
		return nil
	}
	// Finalizers only, on the Secret's metadata: the merge patch carries no
	// data, and the object is read through the API reader, not a cache.
	base := secret.DeepCopy()
	if hold {
		controllerutil.AddFinalizer(secret, finalizer)
	} else {
		controllerutil.RemoveFinalizer(secret, finalizer)
	}
	if err := r.Source.Patch(ctx, secret, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the finalizers of target kubeconfig Secret %s: %w", key, err)
	}
	return nil
}

// releaseClaim gives up mo's claim, if it holds it; a dry run never does.
func (r *MoveOperationReconciler) releaseClaim(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if mo.Spec.DryRun {
		return nil
	}
	return r.claimLock().Release(ctx, holderOf(mo))
}

// stillMoving reports whether the MoveOperation holding the claim exists and
// has not ended. It reads the API server, not the cache: a cache that has
// not seen the holder yet must not hand its claim to somebody else.
func (r *MoveOperationReconciler) stillMoving(ctx context.Context, h claim.Holder) (bool, error) {
	mo := &movev1alpha1.MoveOperation{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Name}, mo); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return mo.UID == h.UID && !phaseOf(mo).IsTerminal(), nil
}

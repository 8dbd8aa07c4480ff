package quiesce

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Controller is a provider controller Deployment, as the move sees it.
type Controller struct {
	Key types.NamespacedName
	// Replicas is the Deployment's current spec.replicas.
	Replicas int32
	// Recorded is the replica count saved before the move, when one was saved.
	Recorded *int32
	// Manager is set for a Deployment that manages the provider Deployments
	// (cluster-api-operator, or one the user names): it is stopped before
	// the providers and restarted after them.
	Manager bool
}

// SelectControllers lists the Deployments matching selector in every
// namespace, leaving out those in exclude (the operator's own Deployment),
// sorted by namespace and name so that every caller sees the same order.
func SelectControllers(ctx context.Context, c client.Reader, selector labels.Selector, exclude ...types.NamespacedName) ([]Controller, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing controller Deployments matching %q: %w", selector, err)
	}
	skip := map[types.NamespacedName]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	out := make([]Controller, 0, len(list.Items))
	for i := range list.Items {
		d := &list.Items[i]
		key := client.ObjectKeyFromObject(d)
		if skip[key] {
			continue
		}
		ctrl := Controller{Key: key, Replicas: ptr.Deref(d.Spec.Replicas, 1)}
		if recorded, ok, err := recordedReplicas(d); err != nil {
			return nil, err
		} else if ok {
			ctrl.Recorded = ptr.To(recorded)
		}
		out = append(out, ctrl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, nil
}

func recordedReplicas(d *appsv1.Deployment) (int32, bool, error) {
	v, ok := d.Annotations[movev1alpha1.OriginalReplicasAnnotation]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("annotation %s=%q on Deployment %s/%s is not a replica count; fix or remove it",
			movev1alpha1.OriginalReplicasAnnotation, v, d.Namespace, d.Name)
	}
	return int32(n), true, nil
}

// Record saves each controller's current replica count in its
// original-replicas annotation, unless one is already there: a resumed move
// must never record the zero it set itself. It returns the recorded counts.
func Record(ctx context.Context, c client.Client, controllers []Controller) ([]Controller, error) {
	out := make([]Controller, 0, len(controllers))
	for _, ctrl := range controllers {
		recorded, err := record(ctx, c, ctrl.Key)
		if err != nil {
			return nil, err
		}
		ctrl.Recorded = ptr.To(recorded)
		out = append(out, ctrl)
	}
	return out, nil
}

// record saves one Deployment's replica count unless already saved, and
// returns the saved count. The write is conditional on the resourceVersion
// read, so the count saved is the count the Deployment had when saved; a
// conflict (its status changed meanwhile, say) reads it again.
func record(ctx context.Context, c client.Client, key types.NamespacedName) (int32, error) {
	var recorded int32
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return fmt.Errorf("getting controller Deployment %s: %w", key, err)
		}
		n, ok, err := recordedReplicas(d)
		if err != nil {
			return err
		}
		if ok {
			recorded = n
			return nil
		}
		replicas := ptr.Deref(d.Spec.Replicas, 1)
		patch := client.MergeFromWithOptions(d.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[movev1alpha1.OriginalReplicasAnnotation] = strconv.Itoa(int(replicas))
		if err := c.Patch(ctx, d, patch); err != nil {
			return err
		}
		recorded = replicas
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recording replicas of controller Deployment %s: %w", key, err)
	}
	return recorded, nil
}

// ScaleDown sets every controller to zero replicas. It refuses a controller
// whose replica count was not recorded first, because restoring it would
// then have to guess.
func ScaleDown(ctx context.Context, c client.Client, controllers []Controller) error {
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			return fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		if ptr.Deref(d.Spec.Replicas, 1) == 0 {
			continue // down already: no count to lose
		}
		if _, ok := d.Annotations[movev1alpha1.OriginalReplicasAnnotation]; !ok {
			return fmt.Errorf("controller Deployment %s has no %s annotation: record replicas before scaling down",
				ctrl.Key, movev1alpha1.OriginalReplicasAnnotation)
		}
		if err := setReplicas(ctx, c, d, 0); err != nil {
			return err
		}
	}
	return nil
}

// RunningPods returns, per controller that still has pods, how many it has.
// A controller is down only when its pods are gone, not when its replica
// count says zero: a terminating pod may still be writing.
func RunningPods(ctx context.Context, c client.Reader, controllers []Controller) (map[types.NamespacedName]int, error) {
	remaining := map[types.NamespacedName]int{}
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			return nil, fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("controller Deployment %s has an invalid selector: %w", ctrl.Key, err)
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, fmt.Errorf("listing pods of controller Deployment %s: %w", ctrl.Key, err)
		}
		if n := len(pods.Items); n > 0 {
			remaining[ctrl.Key] = n
		}
	}
	return remaining, nil
}

// Restore scales every controller back to its recorded replica count: the
// Deployment's annotation, else the caller's record (Controller.Recorded,
// the MoveOperation status), else fallback. A Deployment with neither
// annotation nor record that is running already is left alone: it was
// restored before a crash and forgotten, or never stopped; scaling it to the
// fallback would undo a count that is right. A controller whose Deployment
// is gone (deleted during the move) has nothing left to restore: it is left
// out of what Restore returns, and restoring the others goes on. Restore is
// idempotent, also after Forget.
func Restore(ctx context.Context, c client.Client, controllers []Controller, fallback int32) ([]Controller, error) {
	restored, _, err := RestoreAndCheck(ctx, c, controllers, fallback)
	return restored, err
}

// RestoreAndCheck restores as Restore does and says which of the restored
// controllers are not yet Available at their restored replica count, with
// a word on what each lacks, from the same read of each Deployment (or
// the answer to the patch that scaled it): a wait for the restart polls
// both, and one read answers both. One whose Deployment is gone is not waited
// for.
func RestoreAndCheck(ctx context.Context, c client.Client, controllers []Controller, fallback int32) ([]Controller, map[types.NamespacedName]string, error) {
	out := make([]Controller, 0, len(controllers))
	waiting := map[types.NamespacedName]string{}
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		want, err := replicasToRestore(d, ctrl, fallback)
		if err != nil {
			return nil, nil, err
		}
		if current := ptr.Deref(d.Spec.Replicas, 1); current != want {
			// The patch's answer is the Deployment as scaled: its new
			// generation is not yet observed, so it is not Available,
			// and the next look reads its rollout.
			if err := setReplicas(ctx, c, d, want); err != nil {
				return nil, nil, err
			}
		}
		reason, err := notAvailable(d)
		if err != nil {
			return nil, nil, fmt.Errorf("computing the status of controller Deployment %s: %w", ctrl.Key, err)
		}
		if reason != "" {
			waiting[ctrl.Key] = reason
		}
		ctrl.Replicas = want
		out = append(out, ctrl)
	}
	return out, waiting, nil
}

// replicasToRestore is the count Restore gives a controller's Deployment d:
// its annotation, else the status's record, else what it runs now if it
// runs, else fallback.
func replicasToRestore(d *appsv1.Deployment, ctrl Controller, fallback int32) (int32, error) {
	current := ptr.Deref(d.Spec.Replicas, 1)
	n, annotated, err := recordedReplicas(d)
	switch {
	case err != nil:
		return 0, err
	case annotated:
		return n, nil
	case ctrl.Recorded != nil:
		return *ctrl.Recorded, nil
	case current > 0:
		return current, nil
	}
	return fallback, nil
}

// notAvailable says why a Deployment is not fully rolled out and available,
// or returns "" when it is. It asks kstatus, whose Current is what kubectl
// rollout status, Flux and Argo CD mean by a Deployment that is done: its
// controller observed the spec, every replica is updated, ready and
// available, none is left over from before, and the Deployment says it is
// Available.
func notAvailable(d *appsv1.Deployment) (string, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: content}
	// A typed read leaves the kind empty; kstatus needs it to apply its
	// rules for Deployments.
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	res, err := status.Compute(u)
	if err != nil {
		return "", err
	}
	if res.Status == status.CurrentStatus {
		return "", nil
	}
	return res.Message, nil
}

// Forget drops the original-replicas annotation from every controller, once
// it is restored and Available: the move no longer needs that memory. A
// Deployment that is gone holds none.
func Forget(ctx context.Context, c client.Client, controllers []Controller) error {
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		if _, ok := d.Annotations[movev1alpha1.OriginalReplicasAnnotation]; !ok {
			continue
		}
		patch := client.MergeFrom(d.DeepCopy())
		delete(d.Annotations, movev1alpha1.OriginalReplicasAnnotation)
		if err := c.Patch(ctx, d, patch); err != nil {
			return fmt.Errorf("dropping %s from controller Deployment %s: %w", movev1alpha1.OriginalReplicasAnnotation, ctrl.Key, err)
		}
	}
	return nil
}

// setReplicas patches spec.replicas alone: setting a count is idempotent, so
// no lock is needed against the status updates that keep changing the
// Deployment's resourceVersion.
func setReplicas(ctx context.Context, c client.Client, d *appsv1.Deployment, n int32) error {
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(n)
	if err := c.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scaling controller Deployment %s/%s to %d: %w", d.Namespace, d.Name, n, err)
	}
	return nil
}

// Restarted returns, per stopped controller that runs again, what shows it:
// replicas above zero (somebody scaled it up: its pods may not exist yet)
// or pods. A controller whose Deployment is gone does not run.
func Restarted(ctx context.Context, c client.Reader, controllers []Controller) (map[types.NamespacedName]string, error) {
	out := map[types.NamespacedName]string{}
	var atZero []Controller
	for _, ctrl := range controllers {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, ctrl.Key, d); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("getting controller Deployment %s: %w", ctrl.Key, err)
		}
		if n := ptr.Deref(d.Spec.Replicas, 1); n > 0 {
			out[ctrl.Key] = fmt.Sprintf("scaled up to %d", n)
			continue
		}
		atZero = append(atZero, ctrl)
	}
	pods, err := RunningPods(ctx, c, atZero)
	if err != nil {
		return nil, err
	}
	for k, n := range pods {
		out[k] = fmt.Sprintf("%d pods", n)
	}
	return out, nil
}

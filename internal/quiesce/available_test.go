package quiesce

import (
	"context"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// rolledOut returns a Deployment of n replicas that its controller has
// finished rolling out.
func rolledOut(n int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi-system", Name: "capi-controller-manager", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(n), ProgressDeadlineSeconds: ptr.To[int32](600)},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2,
			Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		},
	}
}

func TestNotAvailable(t *testing.T) {
	tests := []struct {
		name      string
		change    func(*appsv1.Deployment)
		available bool
	}{
		{name: "a Deployment rolled out is available", change: func(*appsv1.Deployment) {}, available: true},
		{name: "a Deployment scaled to zero and settled is available", change: func(d *appsv1.Deployment) {
			*d = *rolledOut(0)
		}, available: true},
		{name: "a new replica count its controller has not observed is not", change: func(d *appsv1.Deployment) {
			d.Generation = 3
		}},
		{name: "a replica not yet updated is not", change: func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas = 1
		}},
		{name: "a replica not yet available is not", change: func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas = 1
		}},
		{name: "an old replica still terminating is not", change: func(d *appsv1.Deployment) {
			d.Status.Replicas = 3
		}},
		{name: "a Deployment that does not say it is Available is not", change: func(d *appsv1.Deployment) {
			d.Status.Conditions[0].Status = corev1.ConditionFalse
		}},
		{name: "a Deployment past its progress deadline is not", change: func(d *appsv1.Deployment) {
			d.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rolledOut(2)
			tt.change(d)
			reason, err := notAvailable(d)
			if err != nil {
				t.Fatal(err)
			}
			if (reason == "") != tt.available {
				t.Errorf("notAvailable = %q, want available %t", reason, tt.available)
			}
		})
	}
}

func TestRestoreAndCheckReadsEachDeploymentOnceWhileItWaits(t *testing.T) {
	ctx := context.Background()
	running := rolledOut(2)
	stopped := rolledOut(0)
	stopped.Name = "capl-controller-manager"
	var gets, patches atomic.Int32
	c := fake.NewClientBuilder().WithObjects(running, stopped).WithStatusSubresource(&appsv1.Deployment{}).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	controllers := []Controller{
		{Key: client.ObjectKeyFromObject(running)},
		{Key: client.ObjectKeyFromObject(stopped), Recorded: ptr.To[int32](1)},
		{Key: types.NamespacedName{Namespace: "gone", Name: "deleted-during-the-move"}},
	}

	restored, waiting, err := RestoreAndCheck(ctx, c, controllers, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(restored) != 2 || restored[1].Replicas != 1 {
		t.Errorf("restored %+v, want the two Deployments that exist, the stopped one at its recorded 1", restored)
	}
	if _, ok := waiting[restored[1].Key]; !ok || len(waiting) != 1 {
		t.Errorf("waiting for %v, want only the Deployment just scaled", waiting)
	}
	// One read each: the Deployment scaled is judged by the patch's answer.
	if gets.Load() != 3 || patches.Load() != 1 {
		t.Errorf("%d reads and %d patches, want 3 and 1", gets.Load(), patches.Load())
	}

	gets.Store(0)
	if _, waiting, err = RestoreAndCheck(ctx, c, controllers, 1); err != nil || len(waiting) != 1 {
		t.Fatalf("a poll while the rollout goes on: waiting %v, %v", waiting, err)
	}
	if gets.Load() != 3 || patches.Load() != 1 {
		t.Errorf("a poll made %d reads and %d patches in all, want one read per Deployment and no patch", gets.Load(), patches.Load())
	}
}

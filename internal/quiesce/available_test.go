package quiesce

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

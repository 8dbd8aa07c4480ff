// Package v1alpha1 holds the MoveOperation API: the custom resource with which
// a user asks move-operator to move Cluster API management state from the
// cluster the operator runs in (the source) to another cluster (the target).
//
// +kubebuilder:object:generate=true
// +groupName=move.cluster.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the MoveOperation API.
	GroupVersion = schema.GroupVersion{Group: "move.cluster.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MoveOperation{}, &MoveOperationList{}, &BackupSchedule{}, &BackupScheduleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

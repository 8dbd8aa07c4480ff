package controllers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// excluded returns the Deployments never to stop in a cluster: the
// operator's own, in the source.
func (r *MoveOperationReconciler) excluded(role movev1alpha1.ClusterRole) []types.NamespacedName {
	if role == movev1alpha1.ClusterSource && r.Self.Name != "" {
		return []types.NamespacedName{r.Self}
	}
	return nil
}

func controllerSelectorOf(mo *movev1alpha1.MoveOperation) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(mo.Spec.Controllers.SelectorOrDefault())
}

package gitops

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kind is a kind of GitOps manager: where its CRD is, and the field that
// makes it apply its source by itself.
type kind struct {
	groupKind schema.GroupKind
	// resource is the plural of the kind: with the group, its CRD's name.
	resource string
	// syncPath is the field the move changes to stop the manager, and
	// records and restores.
	syncPath []string
	// suspended reports whether a manager applies nothing by itself.
	suspended func(u *unstructured.Unstructured) bool
	// suspend stops the manager.
	suspend func(u *unstructured.Unstructured) error
}

// The kinds of GitOps managers a move knows.
var (
	// KustomizationKind is Flux's Kustomization.
	KustomizationKind = schema.GroupKind{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization"}
	// HelmReleaseKind is Flux's HelmRelease.
	HelmReleaseKind = schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}
	// ApplicationKind is Argo CD's Application.
	ApplicationKind = schema.GroupKind{Group: "argoproj.io", Kind: "Application"}
)

var kinds = []*kind{
	fluxKind(KustomizationKind, "kustomizations"),
	fluxKind(HelmReleaseKind, "helmreleases"),
	{
		groupKind: ApplicationKind,
		resource:  "applications",
		syncPath:  []string{"spec", "syncPolicy", "automated"},
		// Without an automated policy, or with one explicitly disabled
		// (spec.syncPolicy.automated.enabled: false, Argo CD 3), an
		// Application syncs only when somebody asks.
		suspended: func(u *unstructured.Unstructured) bool {
			automated, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "syncPolicy", "automated")
			if !found || automated == nil {
				return true
			}
			enabled, found, _ := unstructured.NestedBool(u.Object, "spec", "syncPolicy", "automated", "enabled")
			return found && !enabled
		},
		suspend: func(u *unstructured.Unstructured) error {
			unstructured.RemoveNestedField(u.Object, "spec", "syncPolicy", "automated")
			return nil
		},
	},
}

// fluxKind is a Flux kind: both stop at spec.suspend: true.
func fluxKind(gk schema.GroupKind, resource string) *kind {
	return &kind{
		groupKind: gk,
		resource:  resource,
		syncPath:  []string{"spec", "suspend"},
		suspended: func(u *unstructured.Unstructured) bool {
			suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			return suspend
		},
		suspend: func(u *unstructured.Unstructured) error {
			return unstructured.SetNestedField(u.Object, true, "spec", "suspend")
		},
	}
}

func kindOf(gk schema.GroupKind) *kind {
	for _, k := range kinds {
		if k.groupKind == gk {
			return k
		}
	}
	return nil
}

// crdName is the name of the kind's CustomResourceDefinition.
func (k *kind) crdName() string { return k.resource + "." + k.groupKind.Group }

// KindString names a kind of manager as the status does:
// "Kustomization.kustomize.toolkit.fluxcd.io".
func KindString(gk schema.GroupKind) string { return gk.Kind + "." + gk.Group }

package gitops

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The labels and annotations GitOps tools write on the objects they apply.
const (
	// Flux's kustomize-controller and helm-controller label every object
	// they apply with the name and namespace of their Kustomization or
	// HelmRelease.
	FluxKustomizationNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	FluxKustomizationNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
	FluxHelmReleaseNameLabel        = "helm.toolkit.fluxcd.io/name"
	FluxHelmReleaseNamespaceLabel   = "helm.toolkit.fluxcd.io/namespace"

	// ArgoInstanceLabel is Argo CD's label tracking: the Application's name,
	// or "<namespace>_<name>" for an Application outside Argo CD's own
	// namespace.
	ArgoInstanceLabel = "argocd.argoproj.io/instance"
	// ArgoTrackingIDAnnotation is Argo CD's annotation tracking:
	// "<application>:<group>/<kind>:<namespace>/<name>", the application
	// named as in ArgoInstanceLabel.
	ArgoTrackingIDAnnotation = "argocd.argoproj.io/tracking-id"
)

// Ref names a GitOps manager. An Argo CD Application named by its objects
// without a namespace has none until Resolve finds it.
type Ref struct {
	GroupKind schema.GroupKind
	Namespace string
	Name      string
}

// String names the manager the way messages do.
func (r Ref) String() string {
	if r.Namespace == "" {
		return KindString(r.GroupKind) + " " + r.Name
	}
	return KindString(r.GroupKind) + " " + r.Namespace + "/" + r.Name
}

func compareRefs(a, b Ref) int {
	return cmp.Or(
		cmp.Compare(KindString(a.GroupKind), KindString(b.GroupKind)),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}

// ManagersOf returns the GitOps managers that an object's labels and
// annotations name, sorted. An object applied by a Kustomization and by an
// Application (say, an Application that renders a Flux-labelled manifest)
// names both.
func ManagersOf(obj metav1.Object) []Ref {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	var out []Ref
	add := func(r Ref) {
		if r.Name != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	flux := func(gk schema.GroupKind, nameLabel, namespaceLabel string) {
		name := labels[nameLabel]
		// Flux writes both labels; should the namespace be missing, the
		// manager is looked for beside the object.
		namespace := cmp.Or(labels[namespaceLabel], obj.GetNamespace())
		add(Ref{GroupKind: gk, Namespace: namespace, Name: name})
	}
	flux(KustomizationKind, FluxKustomizationNameLabel, FluxKustomizationNamespaceLabel)
	flux(HelmReleaseKind, FluxHelmReleaseNameLabel, FluxHelmReleaseNamespaceLabel)
	add(argoApplication(labels[ArgoInstanceLabel]))
	if id := annotations[ArgoTrackingIDAnnotation]; id != "" {
		app, _, _ := strings.Cut(id, ":")
		add(argoApplication(app))
	}
	slices.SortFunc(out, compareRefs)
	return out
}

// argoApplication reads an Application as Argo CD names it on its objects.
func argoApplication(value string) Ref {
	ref := Ref{GroupKind: ApplicationKind, Name: value}
	if ns, name, ok := strings.Cut(value, "_"); ok && ns != "" && name != "" {
		ref.Namespace, ref.Name = ns, name
	}
	return ref
}

// Managed is a GitOps manager and how many moved objects it manages.
type Managed struct {
	Ref
	Objects int
}

// tally counts the managers of objects as they are read, so that a reader
// of a whole fleet keeps counts, never the objects.
type tally struct {
	counts  map[Ref]int
	managed int
}

func (t *tally) add(obj metav1.Object) {
	refs := ManagersOf(obj)
	if len(refs) == 0 {
		return
	}
	t.managed++
	if t.counts == nil {
		t.counts = map[Ref]int{}
	}
	for _, r := range refs {
		t.counts[r]++
	}
}

// result returns the managers, sorted, with how many of the objects each
// manages, and how many of the objects any manages.
func (t *tally) result() ([]Managed, int) {
	var managers []Managed
	for r, n := range t.counts {
		managers = append(managers, Managed{Ref: r, Objects: n})
	}
	slices.SortFunc(managers, func(a, b Managed) int { return compareRefs(a.Ref, b.Ref) })
	return managers, t.managed
}

// Describe names managers for a message, the first limit of them.
func Describe(managers []Manager, limit int) string {
	parts := make([]string, 0, min(len(managers), limit)+1)
	for i, m := range managers {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(managers)-limit))
			break
		}
		what := fmt.Sprintf("%d objects", m.Objects)
		if len(m.Manages) > 0 {
			children := make([]string, 0, len(m.Manages))
			for _, c := range m.Manages {
				children = append(children, c.String())
			}
			applies := "applies " + strings.Join(children, " and ")
			if m.Objects == 0 {
				what = applies
			} else {
				what += "; " + applies
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", m.Ref, what, m.State))
	}
	return strings.Join(parts, ", ")
}

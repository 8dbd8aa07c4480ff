package gitops

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func object(namespace, name string, labels, annotations map[string]string) metav1.Object {
	return &metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, Annotations: annotations}
}

func TestManagersOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  metav1.Object
		want []Ref
	}{{
		name: "an object without GitOps labels has no manager",
		obj:  object("fleet", "c1", map[string]string{"cluster.x-k8s.io/cluster-name": "c1"}, nil),
	}, {
		name: "a Flux Kustomization is named by its name and namespace labels",
		obj: object("fleet", "c1", map[string]string{
			FluxKustomizationNameLabel: "clusters", FluxKustomizationNamespaceLabel: "flux-system",
		}, nil),
		want: []Ref{{GroupKind: KustomizationKind, Namespace: "flux-system", Name: "clusters"}},
	}, {
		name: "a Flux HelmRelease without its namespace label is looked for beside the object",
		obj:  object("team-b", "c1", map[string]string{FluxHelmReleaseNameLabel: "capi-clusters"}, nil),
		want: []Ref{{GroupKind: HelmReleaseKind, Namespace: "team-b", Name: "capi-clusters"}},
	}, {
		name: "an Argo CD instance label names an Application in an unknown namespace",
		obj:  object("fleet", "c1", map[string]string{ArgoInstanceLabel: "workload-clusters"}, nil),
		want: []Ref{{GroupKind: ApplicationKind, Name: "workload-clusters"}},
	}, {
		name: "an Argo CD instance label of an Application in any namespace names its namespace",
		obj:  object("fleet", "c1", map[string]string{ArgoInstanceLabel: "team-a_clusters"}, nil),
		want: []Ref{{GroupKind: ApplicationKind, Namespace: "team-a", Name: "clusters"}},
	}, {
		name: "an Argo CD tracking-id annotation names its Application before the first colon",
		obj: object("fleet", "c1", nil, map[string]string{
			ArgoTrackingIDAnnotation: "workload-clusters:cluster.x-k8s.io/Cluster:fleet/c1",
		}),
		want: []Ref{{GroupKind: ApplicationKind, Name: "workload-clusters"}},
	}, {
		name: "the label and the annotation of the same Application name it once",
		obj: object("fleet", "c1", map[string]string{ArgoInstanceLabel: "apps"}, map[string]string{
			ArgoTrackingIDAnnotation: "apps:/Secret:fleet/c1",
		}),
		want: []Ref{{GroupKind: ApplicationKind, Name: "apps"}},
	}, {
		name: "an object applied by both Flux and Argo CD names both, sorted by kind",
		obj: object("fleet", "c1", map[string]string{
			ArgoInstanceLabel:               "apps",
			FluxKustomizationNameLabel:      "clusters",
			FluxKustomizationNamespaceLabel: "flux-system",
		}, nil),
		want: []Ref{
			{GroupKind: ApplicationKind, Name: "apps"},
			{GroupKind: KustomizationKind, Namespace: "flux-system", Name: "clusters"},
		},
	}, {
		name: "an empty label names nothing",
		obj:  object("fleet", "c1", map[string]string{FluxKustomizationNameLabel: "", ArgoInstanceLabel: ""}, nil),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ManagersOf(tc.obj)); diff != "" {
				t.Errorf("managers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTheTallyAddsUpTheObjectsOfEachManager(t *testing.T) {
	flux := map[string]string{FluxKustomizationNameLabel: "clusters", FluxKustomizationNamespaceLabel: "flux-system"}
	both := map[string]string{FluxKustomizationNameLabel: "clusters", FluxKustomizationNamespaceLabel: "flux-system", ArgoInstanceLabel: "apps"}
	var counts tally
	for _, obj := range []metav1.Object{
		object("fleet", "a", flux, nil),
		object("fleet", "b", flux, nil),
		object("fleet", "c", both, nil),
		object("fleet", "d", nil, nil),
	} {
		counts.add(obj)
	}
	managers, managed := counts.result()
	want := []Managed{
		{Ref: Ref{GroupKind: ApplicationKind, Name: "apps"}, Objects: 1},
		{Ref: Ref{GroupKind: KustomizationKind, Namespace: "flux-system", Name: "clusters"}, Objects: 3},
	}
	if diff := cmp.Diff(want, managers); diff != "" {
		t.Errorf("managers (-want +got):\n%s", diff)
	}
	if managed != 3 {
		t.Errorf("managed objects: got %d, want 3 (the fourth has no manager)", managed)
	}
}

func TestDescribeNamesWhatEachManagerManages(t *testing.T) {
	app := Ref{GroupKind: ApplicationKind, Namespace: "argocd", Name: "clusters"}
	managers := []Manager{
		{Ref: app, Objects: 12, State: "Reconciling"},
		{Ref: Ref{GroupKind: ApplicationKind, Namespace: "argocd", Name: "root"}, Manages: []Ref{app}, State: "Reconciling"},
		{Ref: Ref{GroupKind: KustomizationKind, Namespace: "flux-system", Name: "gone"}, Objects: 1, State: "NotFound"},
	}
	for _, tc := range []struct {
		name  string
		limit int
		want  string
	}{{
		name:  "every manager is named with its objects, or the managers it applies, and its state",
		limit: 10,
		want: "Application.argoproj.io argocd/clusters (12 objects, Reconciling), " +
			"Application.argoproj.io argocd/root (applies Application.argoproj.io argocd/clusters, Reconciling), " +
			"Kustomization.kustomize.toolkit.fluxcd.io flux-system/gone (1 objects, NotFound)",
	}, {
		name:  "past the limit, the rest are counted",
		limit: 1,
		want:  "Application.argoproj.io argocd/clusters (12 objects, Reconciling), and 2 more",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(managers, tc.limit); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

package backup

import (
	"bytes"
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/graph"
)

func cluster(name string, specPaused bool, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(graph.ClusterGroupKind.WithVersion("v1beta2"))
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(u.Object, specPaused, "spec", "paused")
	return u
}

// A directory clusterctl wrote names nobody as the one who paused its
// Clusters; the restore reads them as paused by itself, so that it resumes
// them as clusterctl's restore does, and leaves a pause someone named
// alone.
func TestAClusterctlArchivesPausesReadAsTheRestoresOwn(t *testing.T) {
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*unstructured.Unstructured{
		cluster("paused", true, nil),
		cluster("running", false, nil),
		cluster("theirs", true, map[string]string{movev1alpha1.PausedByAnnotation: "another"}),
	} {
		if err := w.Add(0, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(archive.Index{}); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r := &Restore{Archive: a, Operation: "restore-op"}
	want := map[string]string{"paused": "restore-op", "running": "", "theirs": "another"}

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"})
	if err := r.source().List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, item := range list.Items {
		if got := item.GetAnnotations()[movev1alpha1.PausedByAnnotation]; got != want[item.GetName()] {
			t.Errorf("listed Cluster %s reads as paused by %q, want %q", item.GetName(), got, want[item.GetName()])
		}
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(graph.ClusterGroupKind.WithVersion("v1beta2"))
	if err := r.source().Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "paused"}, got); err != nil {
		t.Fatal(err)
	}
	if by := got.GetAnnotations()[movev1alpha1.PausedByAnnotation]; by != "restore-op" {
		t.Errorf("the Cluster clusterctl paused reads as paused by %q, want the restore", by)
	}

	a.Index.PausedBy = "backup-op"
	if err := r.source().Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "paused"}, got); err != nil {
		t.Fatal(err)
	}
	if by, ok := got.GetAnnotations()[movev1alpha1.PausedByAnnotation]; ok {
		t.Errorf("in an archive a backup wrote, a Cluster paused by no one reads as paused by %q; a user's pause stays the user's", by)
	}
	if r.pausedBy() != "backup-op" {
		t.Errorf("the restore resumes the pauses of %q, want the backup's", r.pausedBy())
	}
}

package move

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
)

// TestRehearseDeletionAsksWithDryRunsAndTellsARefusalFromNoAnswer shows what
// the rehearsal sends (Deleting's requests, each a dry run, for one object
// of each kind in each namespace and for every Cluster, none for what the
// move keeps) and how it reads the answers: a denial is a refusal, naming
// the object; a webhook that could not be called is no answer, an error.
func TestRehearseDeletionAsksWithDryRunsAndTellsARefusalFromNoAnswer(t *testing.T) {
	configMap := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cluster := schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	object := func(gvk schema.GroupVersionKind, ns, name string, del, finalizers bool) *graph.Object {
		return &graph.Object{ObjectRef: graph.ObjectRef{GVK: gvk, Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}, Delete: del, Finalizers: finalizers}
	}
	plan := graph.NewPlan([][]*graph.Object{
		{object(cluster, "c", "x", true, true), object(cluster, "c", "y", true, true)},
		{object(configMap, "a", "1", true, false), object(configMap, "a", "2", true, false), object(configMap, "a", "kept", false, false),
			object(configMap, "b", "1", true, true)},
	})

	var (
		mu       sync.Mutex
		requests []string
		answer   = map[string]error{}
	)
	record := func(verb string, obj client.Object, dryRun []string) error {
		mu.Lock()
		defer mu.Unlock()
		key := obj.GetNamespace() + "/" + obj.GetName()
		if !slices.Equal(dryRun, []string{metav1.DryRunAll}) {
			t.Errorf("%s %s without dryRun=All", verb, key)
		}
		requests = append(requests, verb+" "+key)
		return answer[verb+" "+key]
	}
	source := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, _ client.Patch, opts ...client.PatchOption) error {
			return record("patch", obj, (&client.PatchOptions{}).ApplyOptions(opts).DryRun)
		},
		Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return record("delete", obj, (&client.DeleteOptions{}).ApplyOptions(opts).DryRun)
		},
	})

	answer["delete c/y"] = apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}, "y",
		errors.New(`ValidatingAdmissionPolicy 'protect' denied request: Clusters are protected from deletion`))
	refusals, err := RehearseDeletion(context.Background(), source, plan, Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(requests)
	want := []string{"delete a/1", "delete b/1", "delete c/x", "delete c/y", "patch b/1", "patch c/x", "patch c/y"}
	if !slices.Equal(requests, want) {
		t.Errorf("requests %v, want %v", requests, want)
	}
	if len(refusals) != 1 || refusals[0].Object.Name != "y" || !strings.Contains(refusals[0].Message, "protected from deletion") {
		t.Errorf("refusals %v, want the one of Cluster c/y, with the policy's message", refusals)
	}

	answer["delete c/y"] = nil
	answer["patch c/x"] = apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "protect.example.com": connect: connection refused`))
	refusals, err = RehearseDeletion(context.Background(), source, plan, Options{Concurrency: 1})
	if err == nil || len(refusals) != 0 {
		t.Errorf("a webhook that could not be called: error %v, refusals %v; want an error and no refusal", err, refusals)
	}
}

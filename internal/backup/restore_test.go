package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
)

// An archive that holds an object the plan would not take (here a Secret
// no Cluster's hierarchy reaches, which a backup never writes) is refused
// by name and with the graph's reason, before anything is written.
func TestARestoreRefusesAnArchiveWhosePlanLeavesObjectsOut(t *testing.T) {
	stray := &unstructured.Unstructured{}
	stray.SetAPIVersion("v1")
	stray.SetKind("Secret")
	stray.SetNamespace("fleet")
	stray.SetName("stray")
	stray.SetUID("uid-stray")
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0, stray); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(archive.Index{Namespaces: []string{"fleet"}, PausedBy: "backup-op"}); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	secrets := graph.Type{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true}
	// The fake client stands in for the cluster's REST mapper alone: Plan
	// reads nothing else of it.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(secrets.GVK, meta.RESTScopeNamespace)
	r := &Restore{Archive: a, Target: fake.NewClientBuilder().WithRESTMapper(mapper).Build(), Operation: "restore-op"}
	_, err = r.Plan(context.Background(), graph.NewTypes(secrets))
	if !errors.Is(err, ErrNotRestorable) || !strings.Contains(err.Error(), "Secret fleet/stray (") {
		t.Errorf("planning an archive with an object no hierarchy reaches returned %v; want %v naming it and why", err, ErrNotRestorable)
	}
}

// archiveOf writes objs, in order, to an unencrypted archive of namespace
// ns, and reads it back.
func archiveOf(t *testing.T, ns string, objs ...*unstructured.Unstructured) *archive.Archive {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := w.Add(0, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(archive.Index{Namespaces: []string{ns}, PausedBy: "backup-op"}); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An archive a Cluster API v1.10 cluster was backed up to (its kinds at
// v1beta1) restores into a v1.14 cluster (v1beta2) as a move from v1.10
// does: planned at the archive's versions, written at the cluster's, each
// object converted by Cluster API's code on its way. A provider's kind the
// cluster stores at another version than the archive holds is refused by
// name before anything is written.
func TestAnArchiveOfAnOlderClusterAPIRestoresConvertedAndAProvidersOtherVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	var cluster *unstructured.Unstructured
	for _, o := range converttest.Objects("fleet") {
		if o.GetKind() == "Cluster" && o.GetName() == "prod" {
			cluster = o
		}
	}
	v1beta2 := schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	clusters := graph.Type{GVK: v1beta2, Resource: "clusters", Namespaced: true, StatusSubresource: true}
	loopMachines := graph.Type{GVK: schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha2", Kind: "LoopMachine"}, Resource: "loopmachines", Namespaced: true}
	kinds := graph.NewTypes(append(graph.CoreTypes(), clusters, loopMachines)...)

	t.Run("a provider's kind held at another version is refused by name", func(t *testing.T) {
		machine := &unstructured.Unstructured{}
		machine.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
		machine.SetKind("LoopMachine")
		machine.SetNamespace("fleet")
		machine.SetName("m")
		machine.SetUID("uid-m")
		r := &Restore{Archive: archiveOf(t, "fleet", cluster, machine), Target: fake.NewClientBuilder().Build(), Operation: "restore-op"}
		_, err := r.Plan(ctx, kinds)
		if !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), "LoopMachine.infrastructure.cluster.x-k8s.io v1alpha1 (1)") ||
			!strings.Contains(err.Error(), "convert only in that provider") || strings.Contains(err.Error(), "Cluster.cluster.x-k8s.io v1beta1") {
			t.Errorf("Plan returned %v; want %v naming the LoopMachines and why, and not the Clusters the operator converts", err, ErrNotServed)
		}
	})

	t.Run("an archive of a newer Cluster API is refused by name in an older one: a restore does not convert back", func(t *testing.T) {
		newer, err := convert.Convert(ctx, cluster, "v1beta2", nil)
		if err != nil {
			t.Fatal(err)
		}
		older := graph.Type{GVK: v1beta2.GroupKind().WithVersion("v1beta1"), Resource: "clusters", Namespaced: true, StatusSubresource: true}
		olderKinds := graph.NewTypes(append(graph.CoreTypes(), older)...)
		r := &Restore{Archive: archiveOf(t, "fleet", newer), Target: fake.NewClientBuilder().Build(), Operation: "restore-op"}
		_, err = r.Plan(ctx, olderKinds)
		if !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), "Cluster.cluster.x-k8s.io v1beta2 (1)") || !strings.Contains(err.Error(), "a restore does not convert objects back") {
			t.Errorf("Plan returned %v; want %v naming the Clusters and saying a restore does not convert back", err, ErrNotServed)
		}
		for _, kv := range r.Versions(olderKinds) {
			if kv.Conversion != "" || kv.Refusal != preflight.RefusalOlderInTarget {
				t.Errorf("%s: conversion %q, refusal %q; want refused %s", graph.KindString(kv.GroupKind), kv.Conversion, kv.Refusal, preflight.RefusalOlderInTarget)
			}
		}
	})

	t.Run("Cluster API's kinds are planned at the archive's version and copied at the cluster's, converted", func(t *testing.T) {
		scheme := runtime.NewScheme()
		if err := corev1.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		scheme.AddKnownTypeWithName(v1beta2, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(v1beta2.GroupVersion().WithKind("ClusterList"), &unstructured.UnstructuredList{})
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(v1beta2, meta.RESTScopeNamespace)
		mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
		withStatus := &unstructured.Unstructured{}
		withStatus.SetGroupVersionKind(v1beta2)
		target := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithStatusSubresource(withStatus).Build()
		r := &Restore{Archive: archiveOf(t, "fleet", cluster), Target: target, Operation: "restore-op"}
		p, err := r.Plan(ctx, kinds)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range r.Versions(kinds) {
			got = append(got, fmt.Sprintf("%s %s>%s %s", graph.KindString(kv.GroupKind), kv.Source, kv.Target, kv.Conversion))
		}
		if want := []string{"Cluster.cluster.x-k8s.io v1beta1>v1beta2 ToNewer"}; !slices.Equal(got, want) {
			t.Errorf("versions %v, want %v", got, want)
		}
		o := p.Objects()[0]
		if o.GVK.Version != "v1beta1" || p.TargetGVK(o.GVK) != v1beta2 {
			t.Fatalf("%s is planned at %s and written at %s; want v1beta1 and v1beta2", o, o.GVK.Version, p.TargetGVK(o.GVK))
		}
		if _, err := r.Copier(p, kinds).CopyGroup(ctx, 0); err != nil {
			t.Fatal(err)
		}
		copied := &unstructured.Unstructured{}
		copied.SetGroupVersionKind(v1beta2)
		if err := target.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "prod"}, copied); err != nil {
			t.Fatal(err)
		}
		want, err := convert.Convert(ctx, cluster, "v1beta2", nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Object["spec"], copied.Object["spec"]); diff != "" {
			t.Errorf("the restored Cluster's spec is not Cluster API's conversion of the archived one (-convert +restored):\n%s", diff)
		}
		// Generations are mapped to the copy's, which this fake leaves at 0.
		withoutGenerations(want.Object["status"])
		withoutGenerations(copied.Object["status"])
		if diff := cmp.Diff(want.Object["status"], copied.Object["status"]); diff != "" {
			t.Errorf("the restored Cluster's status is not the conversion's (-convert +restored):\n%s", diff)
		}
	})
}

// withoutGenerations drops every observedGeneration of a JSON value.
func withoutGenerations(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "observedGeneration")
		for _, item := range v {
			withoutGenerations(item)
		}
	case []any:
		for _, item := range v {
			withoutGenerations(item)
		}
	}
}

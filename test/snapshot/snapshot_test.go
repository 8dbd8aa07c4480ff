package snapshot_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/move-operator/move-operator/test/snapshot"
)

func object(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func machine(uid, resourceVersion string) *unstructured.Unstructured {
	u := object("cluster.x-k8s.io/v1beta2", "Machine", "team-a", "m-1", map[string]any{
		"spec":   map[string]any{"clusterName": "c-1", "version": "v1.34.2"},
		"status": map[string]any{"phase": "Running"},
	})
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(resourceVersion)
	u.SetGeneration(3)
	u.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c-1", "move.cluster.x-k8s.io/operation": uid})
	u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "kept"})
	u.SetFinalizers([]string{"z", "machine.cluster.x-k8s.io"})
	u.SetOwnerReferences(ownerRefs(uid))
	return u
}

func TestNormalize(t *testing.T) {
	t.Run("an object read in two clusters normalizes to the same thing despite UIDs and versions", func(t *testing.T) {
		a := snapshot.Normalize(machine("uid-source", "100"), snapshot.Options{IgnoreLabels: []string{"move.cluster.x-k8s.io/"}})
		b := snapshot.Normalize(machine("uid-target", "7"), snapshot.Options{IgnoreLabels: []string{"move.cluster.x-k8s.io/"}})
		if d := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{a}}, &snapshot.Snapshot{Objects: []snapshot.Object{b}}); d != "" {
			t.Fatalf("unexpected diff:\n%s", d)
		}
		if a.Kind != "Machine.cluster.x-k8s.io" || a.Status != nil {
			t.Errorf("kind %q status %v: want the kind with its group and no status", a.Kind, a.Status)
		}
		if _, ok := a.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			t.Error("last-applied-configuration should be left out")
		}
		if a.Finalizers[0] != "machine.cluster.x-k8s.io" {
			t.Errorf("finalizers %v should be sorted", a.Finalizers)
		}
		if len(a.Owners) != 2 || a.Owners[0].Kind != "KubeadmControlPlane.controlplane.cluster.x-k8s.io" || !a.Owners[0].Controller {
			t.Errorf("owners %+v should be sorted by kind and keep the controller flag", a.Owners)
		}
	})

	t.Run("statuses are captured only when asked for", func(t *testing.T) {
		o := snapshot.Normalize(machine("u", "1"), snapshot.Options{Status: true})
		if o.Status == nil {
			t.Error("status missing")
		}
	})

	t.Run("secret values are compared by digest and never kept", func(t *testing.T) {
		s := object("v1", "Secret", "team-a", "c-1-kubeconfig", map[string]any{
			"type": "cluster.x-k8s.io/secret",
			"data": map[string]any{"value": "c2VjcmV0"},
		})
		o := snapshot.Normalize(s, snapshot.Options{})
		data := o.Content["data"].(map[string]any)
		if v := data["value"].(string); !strings.HasPrefix(v, "sha256:") || strings.Contains(v, "c2VjcmV0") {
			t.Errorf("secret value %q should be a digest", v)
		}
		if s.Object["data"].(map[string]any)["value"] != "c2VjcmV0" {
			t.Error("Normalize must not change its input")
		}
	})
}

// withManagers gives a machine managed fields as a cluster would hold them:
// an Apply entry that names its MachineSet owner by UID, an Update entry,
// and a status entry.
func withManagers(u *unstructured.Unstructured, ownerUID string) *unstructured.Unstructured {
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "capi-topology", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cluster.x-k8s.io/v1beta2", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"` + ownerUID + `\"}":{}}},"f:spec":{"f:version":{}}}`)},
		{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cluster.x-k8s.io/v1beta2", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:clusterName":{}}}`)},
		{Manager: "move-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cluster.x-k8s.io/v1beta2", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:move.cluster.x-k8s.io/operation":{}}}}`)},
	})
	return u
}

func TestManagers(t *testing.T) {
	acrossClusters := snapshot.Options{IgnoreLabels: []string{"move.cluster.x-k8s.io/"}}
	t.Run("Apply entries compare across clusters, owner references named by kind and name instead of UID", func(t *testing.T) {
		a := snapshot.Normalize(withManagers(machine("uid-source", "100"), "uid-source-ms"), acrossClusters)
		b := snapshot.Normalize(withManagers(machine("uid-target", "7"), "uid-target-ms"), acrossClusters)
		if d := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{a}}, &snapshot.Snapshot{Objects: []snapshot.Object{b}}); d != "" {
			t.Fatalf("unexpected diff:\n%s", d)
		}
		want := []snapshot.Manager{{Manager: "capi-topology", Operation: "Apply", APIVersion: "cluster.x-k8s.io/v1beta2",
			Fields: []string{`f:metadata.f:ownerReferences.k:{"owner":"MachineSet.cluster.x-k8s.io/ms"}`, "f:spec.f:version"}}}
		if diff := cmp.Diff(want, a.Managers); diff != "" {
			t.Errorf("managers differ (-want +got):\n%s", diff)
		}
	})

	t.Run("Update entries are compared only when asked for, without the ignored managers", func(t *testing.T) {
		o := snapshot.Normalize(withManagers(machine("u", "1"), "u-ms"), snapshot.Options{UpdateManagers: true, IgnoreManagers: []string{"move-operator"}})
		var names []string
		for _, m := range o.Managers {
			names = append(names, m.Manager+"/"+m.Operation)
		}
		if diff := cmp.Diff([]string{"capi-topology/Apply", "manager/Update"}, names); diff != "" {
			t.Errorf("managers differ (-want +got):\n%s", diff)
		}
	})

	t.Run("a copy whose managed fields still name the source's owner UID differs, and the UID is reported as naming nothing", func(t *testing.T) {
		// What clusterctl's move leaves: owner references pointed at the
		// target's owners, managed fields still naming the source's.
		source := snapshot.Normalize(withManagers(machine("uid-source", "100"), "uid-source-ms"), acrossClusters)
		target := snapshot.Normalize(withManagers(machine("uid-target", "7"), "uid-source-ms"), acrossClusters)
		d := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{source}}, &snapshot.Snapshot{Objects: []snapshot.Object{target}})
		if want := "! Machine.cluster.x-k8s.io team-a/m-1: managed fields of capi-topology (Apply) name an owner reference the object does not have"; !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
		if fields := target.Managers[0].Fields; fields[0] != `f:metadata.f:ownerReferences.k:{"owner":"?"}` {
			t.Errorf("the target's Apply entry has fields %q, want the owner reference named as unknown", fields)
		}
	})

	t.Run("blockOwnerDeletion is compared", func(t *testing.T) {
		a := snapshot.Normalize(machine("u", "1"), snapshot.Options{})
		m := machine("u", "1")
		refs := m.GetOwnerReferences()
		refs[1].BlockOwnerDeletion = ptr.To(true)
		m.SetOwnerReferences(refs)
		b := snapshot.Normalize(m, snapshot.Options{})
		if d := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{a}}, &snapshot.Snapshot{Objects: []snapshot.Object{b}}); !strings.Contains(d, "BlockOwnerDeletion") {
			t.Errorf("diff does not show the blockOwnerDeletion change:\n%s", d)
		}
	})
}

func TestDiff(t *testing.T) {
	base := snapshot.Normalize(machine("u", "1"), snapshot.Options{})
	changed := snapshot.Normalize(machine("u", "1"), snapshot.Options{})
	changed.Content = map[string]any{"spec": map[string]any{"clusterName": "c-1", "version": "v1.35.0"}}
	other := base
	other.Name = "m-2"

	d := snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{base}}, &snapshot.Snapshot{Objects: []snapshot.Object{changed, other}})
	for _, want := range []string{
		"~ Machine.cluster.x-k8s.io team-a/m-1 differs",
		"v1.34.2", "v1.35.0",
		"+ Machine.cluster.x-k8s.io team-a/m-2: unexpected",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	d = snapshot.Diff(&snapshot.Snapshot{Objects: []snapshot.Object{base, other}}, &snapshot.Snapshot{Objects: []snapshot.Object{base}})
	if !strings.Contains(d, "- Machine.cluster.x-k8s.io team-a/m-2: missing") {
		t.Errorf("diff should name the missing object:\n%s", d)
	}
}

func ownerRefs(uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{
		{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms", UID: types.UID(uid + "-ms")},
		{APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlane", Name: "kcp", UID: types.UID(uid + "-kcp"), Controller: ptr.To(true)},
	}
}

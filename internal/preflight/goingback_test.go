package preflight_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
)

const backNamespace = "fleet-back"

// newerFleet is converttest's fleet as a Cluster API v1.14 management
// cluster holds it: every object at v1beta2, its hub, with the changes
// given per "Kind/name" (dotted paths to values), and a UID of its own.
func newerFleet(t *testing.T, changes map[string]map[string]any) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for i, o := range converttest.Objects(backNamespace) {
		_, hub := convert.Versions(o.GroupVersionKind().GroupKind())
		up, err := convert.Convert(context.Background(), o, hub, nil)
		if err != nil {
			t.Fatalf("converting %s %s up: %v", o.GetKind(), o.GetName(), err)
		}
		up.SetUID(k8stypes.UID(fmt.Sprintf("uid-%d", i)))
		for path, v := range changes[o.GetKind()+"/"+o.GetName()] {
			if err := unstructured.SetNestedField(up.Object, v, strings.Split(path, ".")...); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, up)
	}
	return out
}

// backInto returns a source holding objs, and the plan of a move taking
// them into a target that stores every one of their kinds at its
// older version (v1beta1, ExtensionConfig v1alpha1).
func backInto(t *testing.T, objs []*unstructured.Unstructured) (client.Client, *graph.Plan) {
	t.Helper()
	scheme := runtime.NewScheme()
	mapper := meta.NewDefaultRESTMapper(nil)
	var planned []*graph.Object
	older := map[schema.GroupKind]string{}
	seen := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !seen[gvk] {
			seen[gvk] = true
			scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
			scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
			scope := meta.RESTScopeNamespace
			if o.GetNamespace() == "" {
				scope = meta.RESTScopeRoot
			}
			mapper.Add(gvk, scope)
		}
		older[gvk.GroupKind()] = "v1beta1"
		if gvk.Group == "runtime.cluster.x-k8s.io" {
			older[gvk.GroupKind()] = "v1alpha1"
		}
		planned = append(planned, &graph.Object{ObjectRef: graph.ObjectRef{GVK: gvk, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}})
	}
	initial := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		initial = append(initial, o.DeepCopy())
	}
	source := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(initial...).Build()
	plan := graph.NewPlan([][]*graph.Object{planned})
	plan.SetTargetVersions(older)
	return source, plan
}

// A move back into an older Cluster API reads every object of the kinds
// it converts back and sorts what the older version cannot hold: spec and
// metadata fields refuse the object, by kind, object and field; status
// fields are dropped, and listed, only when statuses are carried.
func TestCheckGoingBack(t *testing.T) {
	const machine = "Machine/prod-md-0-7b9c4-xk2lp"
	machineRef := "Machine.cluster.x-k8s.io " + backNamespace + "/prod-md-0-7b9c4-xk2lp"

	t.Run("a fleet that came from v1beta1 goes back whole", func(t *testing.T) {
		source, plan := backInto(t, newerFleet(t, nil))
		back, err := preflight.CheckGoingBack(context.Background(), source, noCRDs(t), plan, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Refused) > 0 || len(back.Dropped) > 0 {
			t.Errorf("refused %v, dropped %v: want none", back.Refused, back.Dropped)
		}
		if back.RefusalMessage() != "" || back.DroppedMessage() != "" {
			t.Errorf("messages %q, %q: want none", back.RefusalMessage(), back.DroppedMessage())
		}
	})

	t.Run("a v1beta2-only spec field refuses its object by kind, object and field; a status field is dropped and listed", func(t *testing.T) {
		source, plan := backInto(t, newerFleet(t, map[string]map[string]any{
			machine: {"spec.minReadySeconds": int64(15), "status.failureDomain": "fd2"},
		}))
		back, err := preflight.CheckGoingBack(context.Background(), source, noCRDs(t), plan, true)
		if err != nil {
			t.Fatal(err)
		}
		want := []preflight.LostFields{{Object: refOf(t, plan, machineRef), Version: "v1beta1", Fields: []string{"spec.minReadySeconds"}}}
		if diff := cmp.Diff(want, back.Refused); diff != "" {
			t.Errorf("refused (-want +got):\n%s", diff)
		}
		wantDropped := []preflight.LostFields{{Object: refOf(t, plan, machineRef), Version: "v1beta1", Fields: []string{"status.failureDomain"}}}
		if diff := cmp.Diff(wantDropped, back.Dropped); diff != "" {
			t.Errorf("dropped (-want +got):\n%s", diff)
		}
		msg := back.RefusalMessage()
		for _, says := range []string{"1 objects", machineRef, "v1beta1 cannot hold spec.minReadySeconds", "clear those fields in the source", "a Cluster API at least as new as the source's"} {
			if !strings.Contains(msg, says) {
				t.Errorf("the refusal %q does not say %q", msg, says)
			}
		}
		if strings.Contains(msg, "status.failureDomain") {
			t.Errorf("the refusal %q names a status field: statuses refuse nothing", msg)
		}
		if dropped := back.DroppedMessage(); !strings.Contains(dropped, machineRef) || !strings.Contains(dropped, "status.failureDomain") {
			t.Errorf("the dropped fields' note %q does not name the Machine and status.failureDomain", dropped)
		}
	})

	t.Run("a status field that cannot go back is not even listed when statuses are not carried", func(t *testing.T) {
		source, plan := backInto(t, newerFleet(t, map[string]map[string]any{machine: {"status.failureDomain": "fd2"}}))
		back, err := preflight.CheckGoingBack(context.Background(), source, noCRDs(t), plan, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Refused) > 0 || len(back.Dropped) > 0 {
			t.Errorf("refused %v, dropped %v: want none", back.Refused, back.Dropped)
		}
	})

	t.Run("objects of kinds stored at one version in both clusters are not read", func(t *testing.T) {
		source, plan := backInto(t, newerFleet(t, map[string]map[string]any{machine: {"spec.minReadySeconds": int64(15)}}))
		versions := plan.TargetVersions()
		delete(versions, schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"})
		plan.SetTargetVersions(versions)
		back, err := preflight.CheckGoingBack(context.Background(), source, noCRDs(t), plan, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Refused) > 0 {
			t.Errorf("refused %v: the Machine does not go back", back.Refused)
		}
	})

	t.Run("the refusal names the first ten objects and says how many more there are", func(t *testing.T) {
		base := newerFleet(t, nil)
		var objs []*unstructured.Unstructured
		for _, o := range base {
			if o.GetKind() != "Machine" {
				continue
			}
			for i := range 12 {
				m := o.DeepCopy()
				m.SetName(fmt.Sprintf("m-%02d", i))
				m.SetUID(k8stypes.UID(fmt.Sprintf("m-%02d", i)))
				if err := unstructured.SetNestedField(m.Object, int64(15), "spec", "minReadySeconds"); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, m)
			}
			break
		}
		source, plan := backInto(t, objs)
		back, err := preflight.CheckGoingBack(context.Background(), source, noCRDs(t), plan, true)
		if err != nil {
			t.Fatal(err)
		}
		msg := back.RefusalMessage()
		for _, says := range []string{"12 objects", backNamespace + "/m-00", backNamespace + "/m-09", "and 2 more objects"} {
			if !strings.Contains(msg, says) {
				t.Errorf("the refusal %q does not say %q", msg, says)
			}
		}
		if strings.Contains(msg, "m-10") || strings.Contains(msg, "m-11") {
			t.Errorf("the refusal %q names more than ten objects", msg)
		}
	})
}

// noCRDs is a target whose CRDs' schemas say nothing: no field is known
// to be pruned there.
func noCRDs(t *testing.T) client.Client {
	t.Helper()
	return fakeManagement(t, "target")
}

// A target whose CRD of an older version lacks a field Cluster API's Go
// type of that version has (Cluster API v1.10's MachineHealthCheck has no
// spec.unhealthyMachineConditions; v1.14's v1beta1 type does) would drop
// it without a word: the object is refused, the field named by its newer
// path.
func TestCheckGoingBackRefusesWhatTheTargetsSchemaDrops(t *testing.T) {
	objs := newerFleet(t, nil)
	source, plan := backInto(t, objs)
	var mhc *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "MachineHealthCheck" {
			mhc = o
		}
	}
	older, err := convert.Convert(context.Background(), mhc, "v1beta1", converttest.ReferenceVersions)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(older.Object, "spec")
	if _, ok := spec["unhealthyMachineConditions"]; !ok {
		t.Fatal("the fixture's MachineHealthCheck has no unhealthyMachineConditions: this test shows nothing")
	}
	anything := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr.To(true)}
	properties := map[string]apiextensionsv1.JSONSchemaProps{}
	for field := range spec {
		if field != "unhealthyMachineConditions" {
			properties[field] = anything
		}
	}
	crd := crd("cluster.x-k8s.io", "MachineHealthCheck", "machinehealthchecks", "v1beta1")
	crd.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
			"spec":   {Type: "object", Properties: properties},
			"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}}
	back, err := preflight.CheckGoingBack(context.Background(), source, fakeManagement(t, "target", crd), plan, true)
	if err != nil {
		t.Fatal(err)
	}
	ref := "MachineHealthCheck.cluster.x-k8s.io " + backNamespace + "/" + mhc.GetName()
	want := []preflight.LostFields{{Object: refOf(t, plan, ref), Version: "v1beta1", Fields: []string{"spec.checks.unhealthyMachineConditions"}}}
	if diff := cmp.Diff(want, back.Refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
}

// refOf is the plan's object named ref (its String).
func refOf(t *testing.T, plan *graph.Plan, ref string) graph.ObjectRef {
	t.Helper()
	for _, o := range plan.Objects() {
		if o.String() == ref {
			return o.ObjectRef
		}
	}
	t.Fatalf("no %s in the plan", ref)
	return graph.ObjectRef{}
}

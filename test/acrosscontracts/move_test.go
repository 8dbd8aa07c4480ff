//go:build cluster

package acrosscontracts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// TestAClusterAPIV110FleetMovesIntoV114ConvertedByTheOperatorWhileTheTargetsWebhooksAreStopped
// moves converttest's fleet, as a Cluster API v1.10 management cluster
// holds it (v1beta1, statuses written by its controllers), with a machine
// of the loop infrastructure provider (stored at one version in both
// clusters), into a target running Cluster API v1.14, statuses carried.
// While the operator copies, the target's providers are at zero: their
// conversion webhooks refuse connections, and the API server would fail
// any write at v1beta1. The move ends Done, and every object is in the
// target at v1beta2 as Cluster API's own conversion makes it.
func TestAClusterAPIV110FleetMovesIntoV114ConvertedByTheOperatorWhileTheTargetsWebhooksAreStopped(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	olderClusterAPIInSource(t)
	source, target := clients(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "v110")
	before := createOlderFleet(t, ctx, source, ns)
	t.Cleanup(func() { removeFleet(t, ns, before) })

	// The first copy of a Cluster API object in the target: the conversion
	// webhook of its kind is asked (a read at v1beta1) and must not answer.
	var stopped sync.Once
	var whileCopying error
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		u, ok := obj.(*unstructured.Unstructured)
		if cluster != "target" || verb != "create" || !ok || u.GetKind() != "Cluster" {
			return
		}
		stopped.Do(func() {
			old := &unstructured.Unstructured{}
			old.SetAPIVersion("cluster.x-k8s.io/v1beta1")
			old.SetKind("Cluster")
			whileCopying = target.Get(ctx, client.ObjectKeyFromObject(u), old)
			if whileCopying == nil {
				whileCopying = fmt.Errorf("no error")
			}
		})
	}})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "v110-to-v114", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{ns}, ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
	g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))

	t.Run("while the operator copied, the target's conversion webhooks did not answer", func(t *testing.T) {
		NewWithT(t).Expect(whileCopying).To(MatchError(ContainSubstring("conversion webhook")),
			"reading a copied Cluster at v1beta1 in the target while the move copied")
	})

	t.Run("once running again, the target's webhooks take the converted objects", func(t *testing.T) {
		// spec.targetValidation Sample: one object of each kind, through
		// the target's admission with a dry-run update.
		NewWithT(t).Expect(done.Status.Plan.Warnings).NotTo(ContainElement(ContainSubstring("the target's webhooks")))
	})

	t.Run("the plan in status lists each kind's versions and how it crossed", func(t *testing.T) {
		g := NewWithT(t)
		versions := map[string]movev1alpha1.KindVersion{}
		for _, kv := range done.Status.Plan.Versions {
			versions[kv.Kind] = kv
		}
		for _, kind := range []string{"Cluster.cluster.x-k8s.io", "Machine.cluster.x-k8s.io", "KubeadmConfig.bootstrap.cluster.x-k8s.io", "KubeadmControlPlane.controlplane.cluster.x-k8s.io"} {
			g.Expect(versions).To(HaveKeyWithValue(kind, movev1alpha1.KindVersion{Kind: kind, Source: "v1beta1", Target: "v1beta2", Conversion: movev1alpha1.ConversionToNewer}))
		}
		g.Expect(versions).To(HaveKeyWithValue("ExtensionConfig.runtime.cluster.x-k8s.io", movev1alpha1.KindVersion{
			Kind: "ExtensionConfig.runtime.cluster.x-k8s.io", Source: "v1alpha1", Target: "v1beta2", Conversion: movev1alpha1.ConversionToNewer}))
		g.Expect(versions).To(HaveKeyWithValue("LoopMachine.infrastructure.cluster.x-k8s.io", movev1alpha1.KindVersion{
			Kind: "LoopMachine.infrastructure.cluster.x-k8s.io", Source: "v1alpha1", Target: "v1alpha1", Conversion: movev1alpha1.ConversionNone}))
	})

	// The target's UIDs of the copies, by kind and name, for the owner
	// references.
	copies := map[string]*unstructured.Unstructured{}
	for key, src := range before {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(targetGVK(t, ctx, target, src.GroupVersionKind()))
		if err := target.Get(ctx, client.ObjectKeyFromObject(src), got); err != nil {
			t.Fatalf("%s is not in the target at %s: %v", key, got.GroupVersionKind().Version, err)
		}
		copies[key] = got
	}

	for _, key := range sortedKeys(before) {
		src, got := before[key], copies[key]
		t.Run(fmt.Sprintf("%s is in the target at %s, the source's as Cluster API's code converts it", key, got.GroupVersionKind().Version), func(t *testing.T) {
			want, err := convert.Convert(ctx, src, got.GroupVersionKind().Version, nil)
			if err != nil {
				t.Fatal(err)
			}
			// References that name a version (a ClusterClass's templates)
			// name the one the target stores the referenced kind at.
			atTargetVersions(t, ctx, target, want.Object["spec"])
			var wantRefs []metav1.OwnerReference
			for _, ref := range src.GetOwnerReferences() {
				gv, _ := schema.ParseGroupVersion(ref.APIVersion)
				owner := copies[keyOf(gv.WithKind(ref.Kind).GroupKind(), src.GetNamespace(), ref.Name)]
				if owner == nil {
					t.Fatalf("the owner %s %s of %s was not moved", ref.Kind, ref.Name, key)
				}
				ref.UID, ref.APIVersion = owner.GetUID(), owner.GetAPIVersion()
				wantRefs = append(wantRefs, ref)
			}
			if diff := cmp.Diff(wantRefs, got.GetOwnerReferences()); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
			for _, e := range got.GetManagedFields() {
				if e.APIVersion != got.GetAPIVersion() {
					t.Errorf("the copy keeps a managed fields entry of %s at %s: the target's API server converts to it through the webhook on every write", e.Manager, e.APIVersion)
				}
				if e.Manager == move.FieldOwner(string(mo.UID)) {
					t.Errorf("the copy keeps the move's own managed fields entry")
				}
			}
			if diff := cmp.Diff(comparable(want).Object, comparable(got).Object); diff != "" {
				t.Errorf("the target holds another object than Cluster API's conversion of the source's (-convert.Convert +target):\n%s", diff)
			}
		})
	}

	t.Run("the source keeps only the global object", func(t *testing.T) {
		g := NewWithT(t)
		for key, src := range before {
			err := source.Get(ctx, client.ObjectKeyFromObject(src), src.DeepCopy())
			if src.GetNamespace() == "" {
				g.Expect(err).NotTo(HaveOccurred(), "%s is copied, never deleted", key)
				continue
			}
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s is still in the source: %v", key, err)
		}
	})
}

// TestAProvidersKindStoredAtAnotherVersionInEachClusterIsRefusedBeforeAnythingStops
// gives both clusters a provider's kind, stored at v1alpha1 in the source
// and v1alpha2 in the target: the operator cannot convert it (only its
// provider can), so Validating refuses the move naming the kind and what
// to install, reason CRDMismatch, and no controller is stopped.
func TestAProvidersKindStoredAtAnotherVersionInEachClusterIsRefusedBeforeAnythingStops(t *testing.T) {
	g := NewWithT(t)
	olderClusterAPIInSource(t)
	installGadgets(t, movetest.Env.Source.Client, "v1alpha1")
	installGadgets(t, movetest.Env.Target.Client, "v1alpha2")
	before := movetest.StateOf(context.Background(), g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := testenv.NewNamespace(t, movetest.Env.Source, "gadgets")
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "gadgets", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: []string{ns}})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)

	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonCRDMismatch))
	for _, says := range []string{"gadgets", "Gadget.infrastructure.cluster.x-k8s.io", "v1alpha1", "v1alpha2", "convert only in that provider", "install in the target the version the source runs"} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(says))
	}
	g.Expect(failed.Status.FailureMessage).NotTo(ContainSubstring("clusters ("), "Cluster API's own kinds convert: they are not refused")
	g.Expect(failed.Status.Plan).NotTo(BeNil())
	g.Expect(failed.Status.Plan.Versions).To(ContainElements(
		movev1alpha1.KindVersion{Kind: "Gadget.infrastructure.cluster.x-k8s.io", Source: "v1alpha1", Target: "v1alpha2", Refusal: movev1alpha1.RefusalNewerInTarget},
		movev1alpha1.KindVersion{Kind: "Cluster.cluster.x-k8s.io", Source: "v1beta1", Target: "v1beta2", Conversion: movev1alpha1.ConversionToNewer},
	))
	g.Expect(failed.Status.Controllers).To(BeEmpty(), "no controller was recorded, so none was stopped")
	g.Expect(movetest.StateOf(context.Background(), g)).To(Equal(before), "the controllers and webhooks of both clusters are as they were")
	movetest.AssertNothingWritten(g, failed)
}

// TestAKindTheTargetDoesNotServeIsRefusedBeforeAnythingStops gives the
// source a provider's kind the target does not serve at all: Validating
// refuses the move naming the kind and what to install, reason
// CRDMismatch, the plan listing it NotInTarget beside Cluster API's kinds
// that convert, and no controller is stopped, nothing written.
func TestAKindTheTargetDoesNotServeIsRefusedBeforeAnythingStops(t *testing.T) {
	g := NewWithT(t)
	olderClusterAPIInSource(t)
	installGadgets(t, movetest.Env.Source.Client, "v1alpha1")
	before := movetest.StateOf(context.Background(), g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := testenv.NewNamespace(t, movetest.Env.Source, "nogadgets")
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "nogadgets", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: []string{ns}})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)

	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonCRDMismatch))
	for _, says := range []string{"gadgets", "Gadget.infrastructure.cluster.x-k8s.io", "not served by the target", "install there the provider"} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(says))
	}
	g.Expect(failed.Status.Plan).NotTo(BeNil())
	g.Expect(failed.Status.Plan.Versions).To(ContainElements(
		movev1alpha1.KindVersion{Kind: "Gadget.infrastructure.cluster.x-k8s.io", Source: "v1alpha1", Refusal: movev1alpha1.RefusalNotInTarget},
		movev1alpha1.KindVersion{Kind: "Cluster.cluster.x-k8s.io", Source: "v1beta1", Target: "v1beta2", Conversion: movev1alpha1.ConversionToNewer},
	))
	g.Expect(failed.Status.Controllers).To(BeEmpty(), "no controller was recorded, so none was stopped")
	g.Expect(movetest.StateOf(context.Background(), g)).To(Equal(before), "the controllers and webhooks of both clusters are as they were")
	movetest.AssertNothingWritten(g, failed)
}

// clients returns clients of both clusters that read and write
// unstructured objects at the versions they are asked for.
func clients(t *testing.T) (source, target client.Client) {
	t.Helper()
	var err error
	if source, err = client.New(movetest.Env.Source.Config, client.Options{}); err != nil {
		t.Fatal(err)
	}
	if target, err = client.New(movetest.Env.Target.Config, client.Options{}); err != nil {
		t.Fatal(err)
	}
	return source, target
}

// movedAlone are the fixtures' kinds that no hierarchy of a Cluster,
// ClusterClass or ClusterResourceSet holds: labelled to move, as a user
// asks for them.
var movedAlone = []string{"MachineDrainRule", "IPAddressClaim", "IPAddress", "ExtensionConfig"}

// createOlderFleet creates converttest's objects in namespace ns of the
// source at their v1beta1 versions, statuses included, as Cluster API
// v1.10's controllers left them, and a LoopMachine of the Machine, with
// owner references to the objects created; it returns each as the source
// holds it, by kind and name. The ExtensionConfig, a global object, gets
// a name of the test's.
func createOlderFleet(t *testing.T, ctx context.Context, c client.Client, ns string) map[string]*unstructured.Unstructured {
	t.Helper()
	uids := map[types.UID]types.UID{}
	out := map[string]*unstructured.Unstructured{}
	objs := converttest.Objects(ns)
	var machine *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Machine" {
			machine = o
		}
	}
	loop := &unstructured.Unstructured{Object: map[string]any{
		"spec":   map[string]any{"providerID": "loop:///" + ns + "/" + machine.GetName()},
		"status": map[string]any{"initialization": map[string]any{"provisioned": true}},
	}}
	loop.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	loop.SetKind("LoopMachine")
	loop.SetNamespace(ns)
	loop.SetName(machine.GetName())
	loop.SetUID("loop-machine")
	loop.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine", Name: machine.GetName(), UID: machine.GetUID(), Controller: ptr.To(true)}})
	objs = append(objs, loop)

	for _, fixture := range objs {
		sent := fixture.DeepCopy()
		for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
			unstructured.RemoveNestedField(sent.Object, "metadata", f)
		}
		if slices.Contains(movedAlone, sent.GetKind()) {
			labels := sent.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[graph.MoveLabel] = ""
			sent.SetLabels(labels)
		}
		if sent.GetNamespace() == "" {
			sent.SetName(ns + "-" + sent.GetName())
		}
		refs := sent.GetOwnerReferences()
		for i := range refs {
			refs[i].UID = uids[refs[i].UID]
		}
		sent.SetOwnerReferences(refs)
		created := sent.DeepCopy()
		if err := c.Create(ctx, created); err != nil {
			t.Fatalf("creating %s %s in the source at %s: %v", sent.GetKind(), sent.GetName(), sent.GetAPIVersion(), err)
		}
		uids[fixture.GetUID()] = created.GetUID()
		if _, ok := sent.Object["status"]; ok {
			sent.SetUID(created.GetUID())
			sent.SetResourceVersion(created.GetResourceVersion())
			if err := c.Status().Update(ctx, sent); err != nil {
				t.Fatalf("writing the status of %s %s: %v", sent.GetKind(), sent.GetName(), err)
			}
		}
		held := &unstructured.Unstructured{}
		held.SetGroupVersionKind(sent.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(sent), held); err != nil {
			t.Fatal(err)
		}
		out[keyOf(held.GroupVersionKind().GroupKind(), held.GetNamespace(), held.GetName())] = held
	}
	return out
}

func keyOf(gk schema.GroupKind, namespace, name string) string {
	return graph.ObjectRef{GVK: gk.WithVersion(""), Namespace: namespace, Name: name}.String()
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// targetGVK is gvk at the version the cluster of c stores its kind at
// (core kinds at their own).
func targetGVK(t *testing.T, ctx context.Context, c client.Client, gvk schema.GroupVersionKind) schema.GroupVersionKind {
	t.Helper()
	if gvk.Group == "" {
		return gvk
	}
	plural := strings.ToLower(gvk.Kind) + "s"
	if strings.HasSuffix(gvk.Kind, "s") {
		plural = strings.ToLower(gvk.Kind) + "es"
	}
	v, err := storageVersionOf(ctx, c, plural+"."+gvk.Group)
	if err != nil {
		t.Fatalf("the storage version of %s: %v", gvk.GroupKind(), err)
	}
	return gvk.GroupKind().WithVersion(v)
}

// atTargetVersions sets, in v (an object's spec), the apiVersion of every
// reference or selector that names one (apiVersion and kind) to the version the
// cluster of c stores the referenced kind at, if it serves that kind.
func atTargetVersions(t *testing.T, ctx context.Context, c client.Client, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		apiVersion, isRef := v["apiVersion"].(string)
		kind, hasKind := v["kind"].(string)
		if isRef && hasKind {
			gv, err := schema.ParseGroupVersion(apiVersion)
			if err != nil {
				t.Fatal(err)
			}
			plural := strings.ToLower(kind) + "s"
			if stored, err := storageVersionOf(ctx, c, plural+"."+gv.Group); err == nil {
				v["apiVersion"] = schema.GroupVersion{Group: gv.Group, Version: stored}.String()
			}
		}
		for _, e := range v {
			atTargetVersions(t, ctx, c, e)
		}
	case []any:
		for _, e := range v {
			atTargetVersions(t, ctx, c, e)
		}
	}
}

// comparable is u without what the API server sets and the move rewires
// (owner references are compared apart), and without the generations its
// status observed (the copy's are its own).
func comparable(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	annotations := u.GetAnnotations()
	delete(annotations, movev1alpha1.CopiedToAnnotation)
	u.SetAnnotations(annotations)
	var drop func(v any)
	drop = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "observedGeneration")
			for _, item := range v {
				drop(item)
			}
		case []any:
			for _, item := range v {
				drop(item)
			}
		}
	}
	drop(u.Object["status"])
	return u
}

// installGadgets installs, until the test ends, a provider's kind Gadget
// labelled for clusterctl, stored at version.
func installGadgets(t *testing.T, c client.Client, version string) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.infrastructure.cluster.x-k8s.io", Labels: map[string]string{graph.ClusterctlLabel: ""}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.cluster.x-k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", ListKind: "GadgetList", Plural: "gadgets", Singular: "gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating the Gadget CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the Gadget CRD: %v", err)
		}
		// Gone before the next test installs it again.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("the Gadget CRD is still there a minute after its deletion")
	})
}

// removeFleet removes the fleet from both clusters, finalizers first (no
// controller runs to take them off), then its namespace in the target.
func removeFleet(t *testing.T, ns string, fleet map[string]*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	source, target := clients(t)
	var problems []string
	for _, c := range []struct {
		name string
		c    client.Client
	}{{"source", source}, {"target", target}} {
		for _, key := range sortedKeys(fleet) {
			o := fleet[key]
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(targetGVK(t, ctx, c.c, o.GroupVersionKind()))
			if err := c.c.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
				continue
			}
			if len(u.GetFinalizers()) > 0 {
				if err := c.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !apierrors.IsNotFound(err) {
					problems = append(problems, fmt.Sprintf("%s: %s: %v", c.name, key, err))
				}
			}
			if err := c.c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
				problems = append(problems, fmt.Sprintf("%s: %s: %v", c.name, key, err))
			}
		}
	}
	if err := target.Delete(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}); err != nil && !apierrors.IsNotFound(err) {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		t.Errorf("removing the fleet: %s", strings.Join(problems, "; "))
	}
}

package move

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
	"github.com/move-operator/move-operator/internal/graph"
)

// acrossVersions is a source that stores Cluster API's kinds at v1beta1
// (Cluster API v1.10) holding converttest's fleet, every object labelled to
// move, and a kubeconfig Secret of its Cluster, and a target that stores
// them at v1beta2 (v1.14) and refuses any request for them at another
// version, as a target whose conversion webhooks are stopped does.
type acrossVersions struct {
	source, target client.Client
	// raw is the target without the refusals, to look at.
	raw  client.Client
	plan *graph.Plan
	// sent are the objects as the source holds them, by source UID.
	sent map[types.UID]*unstructured.Unstructured

	mu sync.Mutex
	// refused are the target's requests at another version.
	refused []string
	// managedFields are, per object key, the managedFields the last patch
	// that set them sent.
	managedFields map[string]any
}

const fleetNamespace = "fleet-a"

func isCAPI(gvk schema.GroupVersionKind) bool {
	return strings.HasSuffix(gvk.Group, "cluster.x-k8s.io")
}

// fakeCluster returns a fake cluster that serves the fixtures' kinds (and
// Secrets and Namespaces) at the version version returns for each, with
// status subresources.
func fakeCluster(kinds []schema.GroupVersionKind, objs ...client.Object) *fake.ClientBuilder {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"}} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	var withStatus []client.Object
	for _, gvk := range kinds {
		scope := meta.RESTScopeNamespace
		if gvk.Kind == "ExtensionConfig" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		withStatus = append(withStatus, u)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithStatusSubresource(withStatus...).WithObjects(objs...)
}

func newAcrossVersions(t *testing.T) *acrossVersions {
	t.Helper()
	return newAcross(t, false)
}

// newBackAcrossVersions is newAcrossVersions the other way: a source that
// stores Cluster API's kinds at v1beta2 (v1.14) holding converttest's
// fleet as Cluster API's code converts it up, owner references naming
// v1beta2 as v1.14's controllers write them, and a target that stores them
// at v1beta1 (v1.10) and refuses any request for them at another version.
func newBackAcrossVersions(t *testing.T) *acrossVersions {
	t.Helper()
	return newAcross(t, true)
}

func newAcross(t *testing.T, back bool) *acrossVersions {
	t.Helper()
	ctx := context.Background()
	a := &acrossVersions{sent: map[types.UID]*unstructured.Unstructured{}, managedFields: map[string]any{}}
	fixtures := converttest.Objects(fleetNamespace)
	if back {
		for i, o := range fixtures {
			_, hub := convert.Versions(o.GroupVersionKind().GroupKind())
			up, err := convert.Convert(ctx, o, hub, nil)
			if err != nil {
				t.Fatal(err)
			}
			refs := up.GetOwnerReferences()
			for j := range refs {
				gv, _ := schema.ParseGroupVersion(refs[j].APIVersion)
				_, ownerHub := convert.Versions(gv.WithKind(refs[j].Kind).GroupKind())
				refs[j].APIVersion = schema.GroupVersion{Group: gv.Group, Version: ownerHub}.String()
			}
			up.SetOwnerReferences(refs)
			fixtures[i] = up
		}
	}
	var prod *unstructured.Unstructured
	var sourceKinds, targetKinds []schema.GroupVersionKind
	seen := map[schema.GroupVersionKind]bool{}
	targetVersions := map[schema.GroupKind]string{}
	var objs []client.Object
	for i, o := range fixtures {
		gvk := o.GroupVersionKind()
		if !seen[gvk] {
			seen[gvk] = true
			to := gvk.GroupKind().WithVersion("")
			if back {
				to.Version = converttest.Objects(fleetNamespace)[i].GroupVersionKind().Version
			} else {
				_, to.Version = convert.Versions(gvk.GroupKind())
			}
			sourceKinds = append(sourceKinds, gvk)
			targetKinds = append(targetKinds, to)
			targetVersions[gvk.GroupKind()] = to.Version
		}
		o.SetResourceVersion("")
		o.SetLabels(merge(o.GetLabels(), map[string]string{graph.MoveLabel: ""}))
		// As the older release's manager wrote it.
		o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: gvk.GroupVersion().String(), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}})
		if o.GetKind() == "Cluster" && o.GetName() == "prod" {
			prod = o
		}
		objs = append(objs, o)
	}
	// A Secret of the Cluster's, whose kind both store at v1: its owner
	// reference names a kind the move converts.
	secret := &unstructured.Unstructured{Object: map[string]any{"type": "cluster.x-k8s.io/secret", "data": map[string]any{"value": "a3ViZWNvbmZpZw=="}}}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetNamespace(fleetNamespace)
	secret.SetName("prod-kubeconfig")
	secret.SetUID("uid-prod-kubeconfig")
	secret.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: prod.GetAPIVersion(), Kind: "Cluster", Name: "prod", UID: prod.GetUID()}})
	secret.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:value":{}}}`)}}})
	objs = append(objs, secret)

	a.source = fakeCluster(sourceKinds, objs...).WithReturnManagedFields().Build()
	var created int
	a.raw = fakeCluster(targetKinds).Build()
	check := func(verb string, obj client.Object) error {
		gvk, err := gvkOfObject(obj, a.raw.Scheme())
		if err != nil {
			return err
		}
		if isCAPI(gvk) && gvk.Version != targetVersions[gvk.GroupKind()] {
			a.mu.Lock()
			a.refused = append(a.refused, fmt.Sprintf("%s %s %s/%s", verb, gvk, obj.GetNamespace(), obj.GetName()))
			a.mu.Unlock()
			return apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: connect: connection refused", gvk.GroupKind()))
		}
		return nil
	}
	a.target = interceptor.NewClient(a.raw.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := check("create", obj); err != nil {
				return err
			}
			a.mu.Lock()
			created++
			obj.SetUID(types.UID(fmt.Sprintf("target-uid-%d", created)))
			a.mu.Unlock()
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := check("get", obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			gvk := list.GetObjectKind().GroupVersionKind()
			item := &metav1.PartialObjectMetadata{}
			item.SetGroupVersionKind(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
			if err := check("list", item); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := check("patch", obj); err != nil {
				return err
			}
			a.notePatch(obj, patch)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := check("delete", obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := check("patch/"+sub, obj); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})

	// The plan, as discovery reads the source: at v1beta1.
	var ts []graph.Type
	for _, gvk := range sourceKinds {
		ts = append(ts, graph.Type{GVK: gvk, Resource: strings.ToLower(gvk.Kind) + "s", Namespaced: gvk.Kind != "ExtensionConfig", StatusSubresource: true})
	}
	g := graph.New(graph.NewTypes(append(graph.CoreTypes(), ts...)...), nil)
	for _, o := range objs {
		read := &unstructured.Unstructured{}
		read.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		if err := a.source.Get(ctx, client.ObjectKeyFromObject(o), read); err != nil {
			t.Fatal(err)
		}
		a.sent[read.GetUID()] = read
		if err := g.Add(read); err != nil {
			t.Fatal(err)
		}
	}
	a.plan = g.Plan(graph.Selection{})
	a.plan.SetTargetVersions(targetVersions)
	return a
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func gvkOfObject(obj client.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("no kind for %T: %v", obj, err)
	}
	return gvks[0], nil
}

// notePatch keeps the managedFields a patch sets.
func (a *acrossVersions) notePatch(obj client.Object, patch client.Patch) {
	data, err := patch.Data(obj)
	if err != nil {
		return
	}
	var body struct {
		Metadata map[string]any `json:"metadata"`
	}
	if json.Unmarshal(data, &body) != nil {
		return
	}
	if mf, ok := body.Metadata["managedFields"]; ok {
		a.mu.Lock()
		a.managedFields[obj.GetObjectKind().GroupVersionKind().Kind+" "+client.ObjectKeyFromObject(obj).String()] = mf
		a.mu.Unlock()
	}
}

func (a *acrossVersions) copyAll(t *testing.T, c *Copier) {
	t.Helper()
	for g := range a.plan.Groups {
		if _, err := c.CopyGroup(context.Background(), g); err != nil {
			t.Fatalf("copying group %d: %v", g+1, err)
		}
	}
}

// TestACopyIntoANewerClusterAPIConvertsEachObjectAndTouchesTheTargetOnlyAtItsVersions
// copies a v1beta1 fleet into a target that stores its kinds at v1beta2 and
// refuses every request at another version, as the API server does once
// the conversion webhooks it would call are stopped.
func TestACopyIntoANewerClusterAPIConvertsEachObjectAndTouchesTheTargetOnlyAtItsVersions(t *testing.T) {
	ctx := context.Background()
	a := newAcrossVersions(t)
	if len(a.plan.Excluded) > 0 {
		t.Fatalf("the plan leaves objects out: %+v", a.plan.Excluded)
	}
	recorded := map[types.UID]bool{}
	c := NewCopier(a.source, a.target, a.plan, "op", Options{}).CarryStatus(func(schema.GroupKind) bool { return true }).
		OnCopied(func(_ context.Context, _ int, uids []types.UID) error {
			for _, u := range uids {
				recorded[u] = true
			}
			return nil
		})
	a.copyAll(t, c)
	if len(a.refused) > 0 {
		t.Fatalf("the copy asked the target for kinds at versions it does not store them at (its conversion webhooks would be called):\n%s", strings.Join(a.refused, "\n"))
	}

	copies := map[types.UID]types.UID{}
	for _, o := range a.plan.Objects() {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(a.plan.TargetGVK(o.GVK))
		if err := a.raw.Get(ctx, o.Key(), got); err != nil {
			t.Fatalf("reading the copy of %s: %v", o, err)
		}
		copies[o.UID] = got.GetUID()
	}
	for _, o := range a.plan.Objects() {
		t.Run(fmt.Sprintf("the copy of %s is Cluster API's conversion of it", o), func(t *testing.T) {
			src := a.sent[o.UID]
			to := a.plan.TargetGVK(o.GVK)
			want, err := convert.Convert(ctx, src, to.Version, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(to)
			if err := a.raw.Get(ctx, o.Key(), got); err != nil {
				t.Fatal(err)
			}
			// Owner references: to the copies, naming the version the
			// target stores the owners' kinds at.
			var wantRefs []metav1.OwnerReference
			for _, ref := range src.GetOwnerReferences() {
				owner, _ := a.plan.Object(ref.UID)
				ref.UID = copies[ref.UID]
				ref.APIVersion = a.plan.TargetGVK(owner.GVK).GroupVersion().String()
				wantRefs = append(wantRefs, ref)
			}
			if diff := cmp.Diff(wantRefs, got.GetOwnerReferences()); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
			for _, u := range []*unstructured.Unstructured{want, got} {
				for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences"} {
					unstructured.RemoveNestedField(u.Object, "metadata", f)
				}
				if u.Object["status"] == nil {
					delete(u.Object, "status") // the fake's, for a kind without one
				}
			}
			// Statuses are carried, generations mapped to the copy's.
			mapGenerations(statusOf(want), src.GetGeneration(), 0)
			mapGenerations(statusOf(got), src.GetGeneration(), 0)
			if to.Kind == "ClusterClass" {
				// Its references to templates of kinds the move converts
				// (and the selectors of its patches, which its webhook
				// wants equal to them) name the target's version; the
				// others stay as they were.
				for path, wantVersion := range map[string]string{
					"spec.patches[0].definitions[0].selector":                       "controlplane.cluster.x-k8s.io/v1beta2",
					"spec.controlPlane.templateRef":                                 "controlplane.cluster.x-k8s.io/v1beta2",
					"spec.workers.machineDeployments[0].bootstrap.templateRef":      "bootstrap.cluster.x-k8s.io/v1beta2",
					"spec.infrastructure.templateRef":                               "infrastructure.cluster.x-k8s.io/v1beta1",
					"spec.workers.machineDeployments[0].infrastructure.templateRef": "infrastructure.cluster.x-k8s.io/v1beta1",
				} {
					ref := refAt(t, got.Object, path)
					if ref["apiVersion"] != wantVersion {
						t.Errorf("%s names %v, want %s", path, ref["apiVersion"], wantVersion)
					}
					refAt(t, want.Object, path)["apiVersion"] = wantVersion
				}
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("the copy is not the conversion of the source (-convert.Convert +copy):\n%s", diff)
			}
		})
	}

	t.Run("managed fields written at the older version are not restored: the target could not convert them", func(t *testing.T) {
		for _, o := range a.plan.Objects() {
			key := a.plan.TargetGVK(o.GVK).Kind + " " + o.Key().String()
			got, ok := a.managedFields[key]
			if !ok {
				t.Errorf("%s: the copy's managed fields were not written", o)
				continue
			}
			entries, _ := got.([]any)
			if a.plan.Converts(o.GVK) {
				if len(entries) != 1 || len(entries[0].(map[string]any)) != 0 {
					t.Errorf("%s: managed fields %v, want one empty entry, which clears them", o, got)
				}
				continue
			}
			if len(entries) != 1 || entries[0].(map[string]any)["apiVersion"] != "v1" {
				t.Errorf("%s: managed fields %v, want the source's v1 entry", o, got)
			}
		}
	})

	t.Run("a rollback deletes the copies, at the target's versions", func(t *testing.T) {
		n, err := Rollback(ctx, a.target, graph.NewTypes(graph.CoreTypes()...), a.plan, "op", recorded, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.refused) > 0 {
			t.Fatalf("the rollback asked the target at other versions:\n%s", strings.Join(a.refused, "\n"))
		}
		if want := len(a.plan.Objects()); n < want {
			t.Errorf("%d deleted, want the %d copies", n, want)
		}
	})
}

// TestACopyBackIntoAnOlderClusterAPIConvertsEachObjectBack copies a v1beta2
// fleet into a target that stores its kinds at v1beta1 and refuses every
// request at another version: each copy is Cluster API's conversion back of
// its source, its references naming the versions the target stores the
// referenced kinds at, its owner references the copies at v1beta1, and
// without the annotation where that conversion keeps the newer object.
func TestACopyBackIntoAnOlderClusterAPIConvertsEachObjectBack(t *testing.T) {
	ctx := context.Background()
	a := newBackAcrossVersions(t)
	if len(a.plan.Excluded) > 0 {
		t.Fatalf("the plan leaves objects out: %+v", a.plan.Excluded)
	}
	// The target's kinds: the fleet's at v1beta1, and those its objects
	// reference, as a v1.10 cluster with CAPD stores them.
	var kinds []graph.Type
	for gk, v := range a.plan.TargetVersions() {
		kinds = append(kinds, graph.Type{GVK: gk.WithVersion(v), Resource: strings.ToLower(gk.Kind) + "s", Namespaced: gk.Kind != "ExtensionConfig"})
	}
	for _, k := range []string{"DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate", "DockerMachinePool"} {
		kinds = append(kinds, graph.Type{GVK: schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: k}, Resource: strings.ToLower(k) + "s", Namespaced: true})
	}
	c := NewCopier(a.source, a.target, a.plan, "op", Options{}).CarryStatus(func(schema.GroupKind) bool { return true }).
		ReferencesIn(graph.NewTypes(append(graph.CoreTypes(), kinds...)...))
	a.copyAll(t, c)
	if len(a.refused) > 0 {
		t.Fatalf("the copy asked the target for kinds at versions it does not store them at (its conversion webhooks would be called):\n%s", strings.Join(a.refused, "\n"))
	}

	copies := map[types.UID]types.UID{}
	for _, o := range a.plan.Objects() {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(a.plan.TargetGVK(o.GVK))
		if err := a.raw.Get(ctx, o.Key(), got); err != nil {
			t.Fatalf("reading the copy of %s: %v", o, err)
		}
		copies[o.UID] = got.GetUID()
	}
	annotated := 0
	for _, o := range a.plan.Objects() {
		t.Run(fmt.Sprintf("the copy of %s is Cluster API's conversion of it back", o), func(t *testing.T) {
			src := a.sent[o.UID]
			to := a.plan.TargetGVK(o.GVK)
			want, err := convert.Convert(ctx, src, to.Version, converttest.ReferenceVersions)
			if err != nil {
				t.Fatal(err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(to)
			if err := a.raw.Get(ctx, o.Key(), got); err != nil {
				t.Fatal(err)
			}
			if _, ok := want.GetAnnotations()[convert.DataAnnotation]; ok {
				annotated++
			}
			if _, ok := got.GetAnnotations()[convert.DataAnnotation]; ok {
				t.Errorf("the copy keeps %s", convert.DataAnnotation)
			}
			dropConversionData(want)
			var wantRefs []metav1.OwnerReference
			for _, ref := range src.GetOwnerReferences() {
				owner, _ := a.plan.Object(ref.UID)
				ref.UID = copies[ref.UID]
				ref.APIVersion = a.plan.TargetGVK(owner.GVK).GroupVersion().String()
				wantRefs = append(wantRefs, ref)
			}
			if diff := cmp.Diff(wantRefs, got.GetOwnerReferences()); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
			for _, u := range []*unstructured.Unstructured{want, got} {
				for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences"} {
					unstructured.RemoveNestedField(u.Object, "metadata", f)
				}
				if u.Object["status"] == nil {
					delete(u.Object, "status")
				}
			}
			mapGenerations(statusOf(want), src.GetGeneration(), 0)
			mapGenerations(statusOf(got), src.GetGeneration(), 0)
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("the copy is not the conversion back of the source (-convert.Convert +copy):\n%s", diff)
			}
		})
	}

	if annotated == 0 {
		t.Errorf("Cluster API's conversion back wrote %s on none of the objects: this test no longer shows it dropped", convert.DataAnnotation)
	}

	t.Run("without the target's kinds, the copy of an object that references another fails naming the kind", func(t *testing.T) {
		a := newBackAcrossVersions(t)
		c := NewCopier(a.source, a.target, a.plan, "op", Options{})
		var err error
		for g := range a.plan.Groups {
			if _, err = c.CopyGroup(ctx, g); err != nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "the target's kinds were not given") {
			t.Errorf("copying = %v, want an error saying the target's kinds were not given", err)
		}
	})
}

// A Copier made after a restart finds the copies and their owners in the
// target by name: at the target's versions too.
func TestACopierAfterARestartFindsTheCopiesAtTheTargetsVersions(t *testing.T) {
	a := newAcrossVersions(t)
	recorded := map[types.UID]bool{}
	first := NewCopier(a.source, a.target, a.plan, "op", Options{}).OnCopied(func(_ context.Context, _ int, uids []types.UID) error {
		for _, u := range uids {
			recorded[u] = true
		}
		return nil
	})
	a.copyAll(t, first)
	again := NewCopier(a.source, a.target, a.plan, "op", Options{}).WithCopies(recorded)
	a.copyAll(t, again)
	if len(a.refused) > 0 {
		t.Fatalf("the copy after a restart asked the target at other versions:\n%s", strings.Join(a.refused, "\n"))
	}
}

func statusOf(u *unstructured.Unstructured) map[string]any {
	s, _ := u.Object["status"].(map[string]any)
	if s == nil {
		return map[string]any{}
	}
	return s
}

// refAt returns the map at a dotted path of obj, where "name[i]" indexes a
// list; the test fails if there is none.
func refAt(t *testing.T, obj map[string]any, path string) map[string]any {
	t.Helper()
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		name, index, indexed := strings.Cut(strings.TrimSuffix(part, "]"), "[")
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: no map at %s", path, part)
		}
		cur = m[name]
		if indexed {
			list, _ := cur.([]any)
			i, err := strconv.Atoi(index)
			if err != nil || i >= len(list) {
				t.Fatalf("%s: no element %s", path, part)
			}
			cur = list[i]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("%s: not a map", path)
	}
	return m
}

//go:build cluster

package acrosscontracts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	"k8s.io/apimachinery/pkg/util/wait"
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

// TestAClusterAPIV114FleetMovesBackIntoV110ConvertedByTheOperator moves
// converttest's fleet as a Cluster API v1.14 management cluster holds it
// (every object at v1beta2, statuses included) back into a target that
// stores Cluster API's kinds at v1beta1, and whose clusterctl inventory
// records Cluster API's providers at v1.10.9, as v1.10 does: the providers
// check lets them be older than the source's, since the move converts each
// of their kinds back. The move ends Done, and every object is in the
// target at v1beta1 (ExtensionConfig v1alpha1) as Cluster API's own
// conversion makes it, its references naming the versions the target
// stores the referenced kinds at, its owner references rewired to the
// copies at v1beta1, and without the conversion-data annotation.
func TestAClusterAPIV114FleetMovesBackIntoV110ConvertedByTheOperator(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	newerClusterAPIInSource(t)
	olderClusterAPIInTarget(t)
	olderClusterAPIInventoryInTarget(t)
	source, target := clients(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "back")
	before := createNewerFleet(t, ctx, source, ns, v110CanHold)
	t.Cleanup(func() { removeFleet(t, ns, before) })

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "v114-to-v110", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{ns}, ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
	g.Expect(movetest.KstatusOf(g, done)).To(Equal(status.CurrentStatus))

	t.Run("the plan in status lists each kind's versions and that it goes back", func(t *testing.T) {
		g := NewWithT(t)
		versions := map[string]movev1alpha1.KindVersion{}
		for _, kv := range done.Status.Plan.Versions {
			versions[kv.Kind] = kv
		}
		for _, kind := range []string{"Cluster.cluster.x-k8s.io", "Machine.cluster.x-k8s.io", "KubeadmConfig.bootstrap.cluster.x-k8s.io", "KubeadmControlPlane.controlplane.cluster.x-k8s.io"} {
			g.Expect(versions).To(HaveKeyWithValue(kind, movev1alpha1.KindVersion{Kind: kind, Source: "v1beta2", Target: "v1beta1", Conversion: movev1alpha1.ConversionToOlder}))
		}
		g.Expect(versions).To(HaveKeyWithValue("ExtensionConfig.runtime.cluster.x-k8s.io", movev1alpha1.KindVersion{
			Kind: "ExtensionConfig.runtime.cluster.x-k8s.io", Source: "v1beta2", Target: "v1alpha1", Conversion: movev1alpha1.ConversionToOlder}))
	})

	copies := map[string]*unstructured.Unstructured{}
	for key, src := range before {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(targetGVK(t, ctx, target, src.GroupVersionKind()))
		if err := target.Get(ctx, client.ObjectKeyFromObject(src), got); err != nil {
			t.Fatalf("%s is not in the target at %s: %v", key, got.GroupVersionKind().Version, err)
		}
		copies[key] = got
	}
	refs := referenceVersionsOf(t, target)
	for _, key := range sortedKeys(before) {
		src, got := before[key], copies[key]
		t.Run(fmt.Sprintf("%s is in the target at %s, the source's as Cluster API's code converts it back", key, got.GroupVersionKind().Version), func(t *testing.T) {
			if v := got.GroupVersionKind().Version; v != "v1beta1" && v != "v1alpha1" {
				t.Fatalf("the target stores %s at %s: this test no longer moves back", key, v)
			}
			want, err := convert.Convert(ctx, src, got.GroupVersionKind().Version, refs)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got.GetAnnotations()[convert.DataAnnotation]; ok {
				t.Errorf("the copy keeps the annotation %s: the older release never reads it", convert.DataAnnotation)
			}
			annotations := want.GetAnnotations()
			delete(annotations, convert.DataAnnotation)
			if len(annotations) == 0 {
				annotations = nil
			}
			want.SetAnnotations(annotations)
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
					t.Errorf("the copy keeps a managed fields entry of %s at %s", e.Manager, e.APIVersion)
				}
				if e.Manager == move.FieldOwner(string(mo.UID)) {
					t.Errorf("the copy keeps the move's own managed fields entry")
				}
			}
			if diff := cmp.Diff(comparable(want).Object, comparable(got).Object); diff != "" {
				t.Errorf("the target holds another object than Cluster API's conversion back of the source's (-convert.Convert +target):\n%s", diff)
			}
		})
	}

	t.Run("the references name the versions the target stores the referenced kinds at", func(t *testing.T) {
		g := NewWithT(t)
		machine := copies[keyOf(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}, ns, machineName(t, before))]
		g.Expect(machine).NotTo(BeNil())
		apiVersion, _, _ := unstructured.NestedString(machine.Object, "spec", "infrastructureRef", "apiVersion")
		g.Expect(apiVersion).To(Equal("infrastructure.cluster.x-k8s.io/v1beta1"))
		apiVersion, _, _ = unstructured.NestedString(machine.Object, "spec", "bootstrap", "configRef", "apiVersion")
		g.Expect(apiVersion).To(Equal("bootstrap.cluster.x-k8s.io/v1beta1"))
	})

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

// v110CanHold leaves out of converttest's fleet the one field that Cluster
// API v1.10's CRDs do not have (its fixtures were written with v1.14's
// v1beta1 types): the MachineHealthCheck's unhealthyMachineConditions.
var v110CanHold = map[string]map[string]any{"MachineHealthCheck/prod-md-0-unhealthy": {"spec.checks.unhealthyMachineConditions": nil}}

// TestAFleetHoldingWhatV1beta1CannotHoldIsRefusedBeforeAnythingStops moves
// the same fleet back with one Machine holding spec.minReadySeconds, which
// v1beta1 has no field for (Cluster API's way back keeps it only in an
// annotation v1.10's controllers never read), and its MachineHealthCheck
// holding spec.checks.unhealthyMachineConditions, which v1.14's v1beta1
// has and v1.10's CRD does not (its API server would drop it): Validating
// refuses the move naming the kinds, the objects and the fields, reason
// FieldsNotInOlderVersion, before any controller is stopped, and nothing
// is written in either cluster. The target's inventory records Cluster
// API v1.10.9, as a real one does: the providers check lets it through,
// and the fields alone refuse the move.
func TestAFleetHoldingWhatV1beta1CannotHoldIsRefusedBeforeAnythingStops(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	newerClusterAPIInSource(t)
	olderClusterAPIInTarget(t)
	olderClusterAPIInventoryInTarget(t)
	source, _ := clients(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "back-refused")
	machine := ""
	for _, o := range converttest.Objects(ns) {
		if o.GetKind() == "Machine" {
			machine = o.GetName()
		}
	}
	fleet := createNewerFleet(t, ctx, source, ns, map[string]map[string]any{"Machine/" + machine: {"spec.minReadySeconds": int64(15)}})
	t.Cleanup(func() { removeFleet(t, ns, fleet) })
	before := movetest.StateOf(ctx, g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "back-refused", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{ns}, ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)

	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonFieldsNotInOlderVersion))
	for _, says := range []string{
		"2 objects", "Machine.cluster.x-k8s.io " + ns + "/" + machine + " (v1beta1 cannot hold spec.minReadySeconds)",
		"MachineHealthCheck.cluster.x-k8s.io " + ns + "/prod-md-0-unhealthy (v1beta1 cannot hold spec.checks.unhealthyMachineConditions)",
		"clear those fields in the source", "a Cluster API at least as new as the source's",
	} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(says))
	}
	g.Expect(failed.Status.Plan).NotTo(BeNil())
	g.Expect(failed.Status.Plan.Versions).To(ContainElement(
		movev1alpha1.KindVersion{Kind: "Machine.cluster.x-k8s.io", Source: "v1beta2", Target: "v1beta1", Conversion: movev1alpha1.ConversionToOlder}))
	g.Expect(failed.Status.Controllers).To(BeEmpty(), "no controller was recorded, so none was stopped")
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(before), "the controllers and webhooks of both clusters are as they were")
	movetest.AssertNothingWritten(g, failed)
	for key, o := range fleet {
		g.Expect(source.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())).To(Succeed(), "%s is still in the source", key)
	}
}

// TestAnOlderClusterAPIThatStoresItsKindsAsTheSourceIsRefusedBeforeAnythingStops
// moves the fleet into a target whose clusterctl inventory records Cluster
// API's providers at v1.10.9 but whose CRDs are v1.14's, storing every
// kind at v1beta2 as the source does: nothing converts back, so nothing
// shows the older providers' API is what the move writes (as with an
// older patch release of one contract, whose controllers may not know the
// newer one's fields). Validating refuses the move as clusterctl would,
// reason ProviderMissing, naming each provider, both versions and the
// kinds that stop it, before any controller is stopped; nothing is
// written in either cluster.
func TestAnOlderClusterAPIThatStoresItsKindsAsTheSourceIsRefusedBeforeAnythingStops(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	newerClusterAPIInSource(t)
	olderClusterAPIInventoryInTarget(t)
	source, _ := clients(t)
	ns := testenv.NewNamespace(t, movetest.Env.Source, "older-inventory")
	fleet := createNewerFleet(t, ctx, source, ns, v110CanHold)
	t.Cleanup(func() { removeFleet(t, ns, fleet) })
	before := movetest.StateOf(ctx, g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "older-inventory", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: []string{ns}, ObjectStatusPolicy: movev1alpha1.ObjectStatusCarry,
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)

	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonProviderMissing), failed.Status.FailureMessage)
	t.Logf("refused: %s", failed.Status.FailureMessage)
	for _, says := range []string{
		"CoreProvider cluster-api is older in the target (" + olderCAPI + ")",
		"BootstrapProvider kubeadm is older in the target (" + olderCAPI + ")",
		"ControlPlaneProvider kubeadm is older in the target (" + olderCAPI + ")",
		"only when the move converts each of their kinds back",
		"it does not convert Cluster.cluster.x-k8s.io", "KubeadmConfig.bootstrap.cluster.x-k8s.io", "KubeadmControlPlane.controlplane.cluster.x-k8s.io",
		"stored at one version in both clusters",
		"at the same or a newer version",
	} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(says))
	}
	g.Expect(failed.Status.Plan).NotTo(BeNil())
	g.Expect(failed.Status.Plan.Versions).To(ContainElement(
		movev1alpha1.KindVersion{Kind: "Cluster.cluster.x-k8s.io", Source: "v1beta2", Target: "v1beta2", Conversion: movev1alpha1.ConversionNone}))
	g.Expect(failed.Status.Controllers).To(BeEmpty(), "no controller was recorded, so none was stopped")
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(before), "the controllers and webhooks of both clusters are as they were")
	movetest.AssertNothingWritten(g, failed)
	for key, o := range fleet {
		g.Expect(source.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())).To(Succeed(), "%s is still in the source", key)
	}
}

// clusterAPIProviders are Cluster API's own providers, by the type and the
// name clusterctl's inventory records them with.
var clusterAPIProviders = [][2]string{{"CoreProvider", "cluster-api"}, {"BootstrapProvider", "kubeadm"}, {"ControlPlaneProvider", "kubeadm"}}

// olderClusterAPIInventoryInTarget makes the target's clusterctl inventory
// record Cluster API's own providers at olderCAPI until the test ends, as
// a v1.10 management cluster's does; the rest of the inventory, and what
// the providers run, stay as they are. At the end each gets back the
// version it recorded.
func olderClusterAPIInventoryInTarget(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := movetest.Env.Target.Client
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	if err := c.List(ctx, list); err != nil {
		t.Fatalf("listing the target's clusterctl inventory: %v", err)
	}
	var changed []string
	for i := range list.Items {
		p := &list.Items[i]
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		name, _, _ := unstructured.NestedString(p.Object, "providerName")
		if !slices.Contains(clusterAPIProviders, [2]string{typ, name}) {
			continue
		}
		was, _, _ := unstructured.NestedString(p.Object, "version")
		setInventoryVersion(t, c, p, olderCAPI)
		t.Cleanup(func() { setInventoryVersion(t, c, p, was) })
		changed = append(changed, fmt.Sprintf("%s %s (%s)", typ, name, was))
	}
	if len(changed) != len(clusterAPIProviders) {
		t.Fatalf("the target's clusterctl inventory records %d of Cluster API's %d providers (%s)", len(changed), len(clusterAPIProviders), strings.Join(changed, ", "))
	}
	t.Logf("the target's clusterctl inventory records %s at %s instead", strings.Join(changed, ", "), olderCAPI)
}

// setInventoryVersion sets the version an inventory Provider records.
func setInventoryVersion(t *testing.T, c client.Client, p *unstructured.Unstructured, version string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"version":%q}`, version)
	if err := c.Patch(context.Background(), p.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Errorf("setting the version of the inventory's Provider %s/%s to %s: %v", p.GetNamespace(), p.GetName(), version, err)
	}
}

// newerClusterAPIInSource makes sure the source still stores Cluster API's
// kinds at v1beta2, as the package's pair starts (Cluster API v1.14):
// olderClusterAPIInSource, which the tests of the way up call, replaces
// those CRDs for the rest of the test binary, and the tests of the way
// back run first (their file sorts first).
func newerClusterAPIInSource(t *testing.T) {
	t.Helper()
	v, err := storageVersionOf(context.Background(), movetest.Env.Source.Client, "clusters.cluster.x-k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	if v != "v1beta2" {
		t.Fatalf("the source stores Clusters at %s, not v1beta2: a test of the way up gave it Cluster API %s's CRDs before this one ran; run the tests of the way back alone, or first", v, olderCAPI)
	}
}

// olderClusterAPIInTarget gives the target, until the test ends, Cluster API
// v1.10.9's CRDs of its own kinds in place of v1.14's (as
// olderClusterAPIInSource gives the source), and the CRDs of the Docker
// infrastructure kinds the fixtures reference, stored at v1beta1 as
// v1.10's CAPD stores them: the target then stores Cluster API's kinds at
// v1beta1 and answers the versions a reference converted back names. At
// the end the target gets v1.14's CRDs back as they were installed.
func olderClusterAPIInTarget(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := movetest.Env.Target.Client
	older, err := olderCRDs(ctx)
	if err != nil {
		t.Fatalf("reading Cluster API %s's CRDs: %v", olderCAPI, err)
	}
	var installed []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range older {
		was := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, was); err != nil {
			t.Fatalf("reading the installed CRD %s: %v", crd.Name, err)
		}
		crd.Labels = was.Labels
		was.ObjectMeta = metav1.ObjectMeta{Name: was.Name, Labels: was.Labels, Annotations: was.Annotations}
		was.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		installed = append(installed, was)
	}
	began := time.Now()
	if err := replaceCRDs(ctx, c, older); err != nil {
		t.Fatalf("giving the target Cluster API %s's CRDs: %v", olderCAPI, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := replaceCRDs(ctx, c, installed); err != nil {
			t.Errorf("giving the target its Cluster API CRDs back: %v", err)
		}
	})
	for _, kind := range []string{"DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate", "DockerMachinePool"} {
		installInfrastructureKind(t, c, kind, "v1beta1")
	}
	t.Logf("the target has Cluster API %s's %d CRDs of its own kinds, in %s", olderCAPI, len(older), time.Since(began).Round(time.Millisecond))
}

// replaceCRDs deletes the CRDs of the cluster of c named as crds are, with
// every object of theirs, and creates crds in their place.
func replaceCRDs(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		if err := c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			return fmt.Errorf("waiting for the CRD %s to be gone: %w", crd.Name, err)
		}
		if err := c.Create(ctx, crd.DeepCopy()); err != nil {
			return fmt.Errorf("creating the CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the CRD %s to be established: %w", name, err)
	}
	return nil
}

// installInfrastructureKind installs, until the test ends, an
// infrastructure provider's kind labelled for clusterctl, stored at
// version, that holds anything.
func installInfrastructureKind(t *testing.T, c client.Client, kind, version string) {
	t.Helper()
	ctx := context.Background()
	plural := strings.ToLower(kind) + "s"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".infrastructure.cluster.x-k8s.io", Labels: map[string]string{graph.ClusterctlLabel: "", "cluster.x-k8s.io/v1beta1": version}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.cluster.x-k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating the %s CRD: %v", kind, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the %s CRD: %v", kind, err)
		}
	})
	if err := waitEstablished(ctx, c, crd.Name); err != nil {
		t.Fatal(err)
	}
}

// createNewerFleet creates converttest's objects in namespace ns of the
// source as a Cluster API v1.14 management cluster holds them: each
// converted up to the version Cluster API's code converts through
// (v1beta2) and created there, statuses included, with owner references
// naming the owners' v1beta2 and UIDs, as v1.14's controllers write them;
// changes set, per "Kind/name", dotted paths to values (nil: removed)
// before the object is created. It returns each as the source holds it, by kind and name.
// The ExtensionConfig, a global object, gets a name of the test's.
func createNewerFleet(t *testing.T, ctx context.Context, c client.Client, ns string, changes map[string]map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	type created struct {
		uid        types.UID
		apiVersion string
	}
	createdOf := map[types.UID]created{}
	out := map[string]*unstructured.Unstructured{}
	for _, fixture := range converttest.Objects(ns) {
		_, hub := convert.Versions(fixture.GroupVersionKind().GroupKind())
		sent, err := convert.Convert(ctx, fixture, hub, nil)
		if err != nil {
			t.Fatalf("converting %s %s up to %s: %v", fixture.GetKind(), fixture.GetName(), hub, err)
		}
		for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
			unstructured.RemoveNestedField(sent.Object, "metadata", f)
		}
		for path, v := range changes[fixture.GetKind()+"/"+fixture.GetName()] {
			if v == nil {
				unstructured.RemoveNestedField(sent.Object, strings.Split(path, ".")...)
				continue
			}
			if err := unstructured.SetNestedField(sent.Object, v, strings.Split(path, ".")...); err != nil {
				t.Fatal(err)
			}
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
		if sent.GetKind() == "Cluster" {
			controlPlaneInitialized(t, sent)
		}
		refs := sent.GetOwnerReferences()
		for i := range refs {
			owner, ok := createdOf[refs[i].UID]
			if !ok {
				t.Fatalf("the owner %s %s of %s %s is not created before it", refs[i].Kind, refs[i].Name, sent.GetKind(), sent.GetName())
			}
			refs[i].UID, refs[i].APIVersion = owner.uid, owner.apiVersion
		}
		sent.SetOwnerReferences(refs)
		obj := sent.DeepCopy()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s in the source at %s: %v", sent.GetKind(), sent.GetName(), sent.GetAPIVersion(), err)
		}
		createdOf[fixture.GetUID()] = created{obj.GetUID(), obj.GetAPIVersion()}
		if _, ok := sent.Object["status"]; ok {
			sent.SetUID(obj.GetUID())
			sent.SetResourceVersion(obj.GetResourceVersion())
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

// controlPlaneInitialized gives a provisioned Cluster the condition
// ControlPlaneInitialized v1.14's controllers set (a v1beta2 condition),
// where the fixture, written by v1.10's, has it only among the v1beta1
// conditions, which the way up keeps under status.deprecated.
func controlPlaneInitialized(t *testing.T, cluster *unstructured.Unstructured) {
	t.Helper()
	conditions, _, _ := unstructured.NestedSlice(cluster.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "ControlPlaneInitialized" {
			return
		}
	}
	conditions = append(conditions, map[string]any{
		"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "",
		"observedGeneration": cluster.GetGeneration(), "lastTransitionTime": "2026-04-01T09:03:00Z",
	})
	if err := unstructured.SetNestedSlice(cluster.Object, conditions, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
}

// referenceVersionsOf answers, as the cluster of c's CRDs do, the version
// it stores a referenced kind at: what Cluster API's webhook in a v1.10
// cluster names in the references it converts back.
func referenceVersionsOf(t *testing.T, c client.Client) convert.ReferenceVersions {
	return func(ctx context.Context, gk schema.GroupKind) (string, error) {
		return schema.GroupVersion{Group: gk.Group, Version: targetGVK(t, ctx, c, gk.WithVersion("")).Version}.String(), nil
	}
}

// machineName is the name of the fleet's one Machine.
func machineName(t *testing.T, fleet map[string]*unstructured.Unstructured) string {
	t.Helper()
	for _, o := range fleet {
		if o.GetKind() == "Machine" {
			return o.GetName()
		}
	}
	t.Fatal("the fleet has no Machine")
	return ""
}

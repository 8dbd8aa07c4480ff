//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// bareMetalHostGVK is a kind outside Cluster API's groups that a provider
// labels for clusterctl, as Metal3 labels its BareMetalHost.
var bareMetalHostGVK = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}

// bareMetalHostCRD is a BareMetalHost-like CRD carrying the labels
// internal/graph reads: clusterctl's, and move (each object moves on its
// own, as no Cluster API object owns a host).
func bareMetalHostCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "baremetalhosts.metal3.io", Labels: map[string]string{graph.ClusterctlLabel: "", graph.MoveLabel: ""}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "metal3.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "baremetalhosts", Singular: "baremetalhost", Kind: "BareMetalHost", ListKind: "BareMetalHostList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
}

// installBareMetalHosts installs the CRD in both clusters until the test
// ends (its objects go with it) and creates hosts in namespace ns of the
// source.
func installBareMetalHosts(ctx context.Context, t *testing.T, ns string, hosts int) []string {
	t.Helper()
	g := NewWithT(t)
	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		crd := bareMetalHostCRD()
		err := m.Client.Create(ctx, crd)
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() { _ = m.Client.Delete(context.Background(), bareMetalHostCRD()) })
		g.Eventually(func() error {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(bareMetalHostGVK.GroupVersion().WithKind("BareMetalHostList"))
			return m.Client.List(ctx, list)
		}).WithTimeout(30*time.Second).Should(Succeed(), "the BareMetalHost CRD is served in %s", m.Name)
	}
	var names []string
	for i := range hosts {
		h := &unstructured.Unstructured{}
		h.SetGroupVersionKind(bareMetalHostGVK)
		h.SetNamespace(ns)
		h.SetName(fmt.Sprintf("host-%d", i))
		g.Expect(unstructured.SetNestedField(h.Object, "ipmi://127.0.0.1:623", "spec", "bmc", "address")).To(Succeed())
		g.Expect(movetest.Env.Source.Client.Create(ctx, h)).To(Succeed())
		names = append(names, h.GetName())
	}
	return names
}

// hostsIn returns the names of the BareMetalHosts of a namespace.
func hostsIn(ctx context.Context, g Gomega, m *testenv.Management, ns string) []string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(bareMetalHostGVK.GroupVersion().WithKind("BareMetalHostList"))
	g.Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, h := range list.Items {
		out = append(out, h.GetName())
	}
	slices.Sort(out)
	return out
}

// grantAggregated creates in a cluster, until the test ends, a ClusterRole
// labelled for aggregation into the operator's role there: what a user
// adds for a provider's kinds (docs/access.md).
func grantAggregated(ctx context.Context, t *testing.T, m *testenv.Management, rules []rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "move-metal3-" + rand.String(5), Labels: map[string]string{access.AggregationLabel: "true"}},
		Rules:      rules,
	}
	NewWithT(t).Expect(m.Client.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = m.Client.Delete(context.Background(), role) })
}

func TestAKindOutsideClusterAPIsGroupsFailsValidatingNamingTheRuleAndMovesOnceALabelledRoleGrantsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	prefix := "bmh" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	hosts := installBareMetalHosts(ctx, t, f.Namespaces[0], 2)
	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := movetest.OpsNamespace(t)

	t.Run("without a rule for it the move fails in Validating, naming the kind, the verbs and the rule, and writes nothing", func(t *testing.T) {
		g := NewWithT(t)
		sourceBefore := movetest.ResourceVersions(ctx, g, movetest.Env.Source, f.Namespaces)
		mo := movetest.NewMoveOperation(t, ns, "no-rule", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: f.Namespaces})
		failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
		g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonAccessDenied))
		for _, want := range []string{
			"source cluster: get, list, patch, delete baremetalhosts.metal3.io",
			"target cluster: get, list, create, update, patch, delete baremetalhosts.metal3.io",
			"target cluster: patch baremetalhosts.metal3.io/status",
			"- apiGroups: [\"metal3.io\"]\n  resources: [\"baremetalhosts\"]\n  verbs: [\"get\",\"list\",\"patch\",\"delete\"]",
			access.AggregationLabel,
		} {
			g.Expect(failed.Status.FailureMessage).To(ContainSubstring(want))
		}
		var phases []movev1alpha1.MovePhase
		for _, p := range failed.Status.PhaseTransitions {
			phases = append(phases, p.Phase)
		}
		g.Expect(phases).To(Equal([]movev1alpha1.MovePhase{movev1alpha1.PhasePending, movev1alpha1.PhaseValidating, movev1alpha1.PhaseFailed}))
		g.Expect(movetest.ResourceVersions(ctx, g, movetest.Env.Source, f.Namespaces)).To(Equal(sourceBefore), "nothing is written in the source")
		g.Expect(hostsIn(ctx, g, movetest.Env.Target, f.Namespaces[0])).To(BeEmpty(), "nothing is written in the target")
		err := movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: f.Namespaces[0]}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the target has no namespace of the move: %v", err)
	})

	t.Run("with a labelled ClusterRole in each cluster the same fleet moves, hosts and all", func(t *testing.T) {
		g := NewWithT(t)
		grantAggregated(ctx, t, movetest.Env.Source, []rbacv1.PolicyRule{{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts"}, Verbs: []string{"get", "list", "patch", "delete"}}})
		grantAggregated(ctx, t, movetest.Env.Target, []rbacv1.PolicyRule{
			{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts/status"}, Verbs: []string{"patch"}},
		})
		mo := movetest.NewMoveOperation(t, ns, "with-rule", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: f.Namespaces})
		movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 4*time.Minute)
		g.Expect(hostsIn(ctx, g, movetest.Env.Target, f.Namespaces[0])).To(Equal(hosts), "the hosts are in the target")
		g.Expect(hostsIn(ctx, g, movetest.Env.Source, f.Namespaces[0])).To(BeEmpty(), "and no longer in the source")
	})
}

func TestARuleTakenAwayFromTheTargetDuringCopyingRollsTheMoveBackAtOnceNamingIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	prefix := "rbac" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})

	// The target's base ClusterRole (dist/target-access.yaml) loses create
	// on Cluster API's kinds once the copy has begun; it is put back after
	// the test whatever happens, as the suite's clusters are shared.
	const base = "move-operator-target-base"
	original := &rbacv1.ClusterRole{}
	g.Expect(movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: base}, original)).To(Succeed())
	t.Cleanup(func() {
		cur := &rbacv1.ClusterRole{}
		if err := movetest.Env.Target.Client.Get(context.Background(), client.ObjectKey{Name: base}, cur); err != nil {
			t.Errorf("putting back %s: %v", base, err)
			return
		}
		cur.Rules = original.Rules
		if err := movetest.Env.Target.Client.Update(context.Background(), cur); err != nil {
			t.Errorf("putting back %s: %v", base, err)
		}
	})
	var (
		once    sync.Once
		takenAt time.Time
	)
	takeCreate := func() {
		cur := &rbacv1.ClusterRole{}
		if err := movetest.Env.Target.Client.Get(ctx, client.ObjectKey{Name: base}, cur); err != nil {
			t.Errorf("reading %s: %v", base, err)
			return
		}
		for i, r := range cur.Rules {
			if slices.Contains(r.APIGroups, "cluster.x-k8s.io") {
				cur.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
			}
		}
		if err := movetest.Env.Target.Client.Update(ctx, cur); err != nil {
			t.Errorf("taking create away from %s: %v", base, err)
		}
		takenAt = time.Now()
	}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, verb string, obj client.Object) {
		if cluster == "target" && verb == "create" && obj.GetNamespace() == f.Namespaces[0] {
			once.Do(takeCreate)
		}
	}})
	ns := movetest.OpsNamespace(t)
	mo := movetest.NewMoveOperation(t, ns, "rule-taken", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Hour}},
	})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 4*time.Minute)
	g.Expect(takenAt).NotTo(BeZero(), "the rule was taken away during the copy")
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonAccessDenied))
	g.Expect(failedInPhase(failed)).To(Equal(movev1alpha1.PhaseCopying))
	for _, want := range []string{"may not create", "cluster.x-k8s.io", `verbs: ["create"]`, movetest.TargetUser} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(want))
	}
	var rollingBackAt time.Time
	for _, p := range failed.Status.PhaseTransitions {
		if p.Phase == movev1alpha1.PhaseRollingBack {
			rollingBackAt = p.Time.Time
		}
	}
	// Promptly: the first refused create fails the move; the copy's
	// timeout (an hour) plays no part.
	g.Expect(rollingBackAt.Sub(takenAt)).To(BeNumerically("<", time.Minute), "rolled back %v after the rule went", rollingBackAt.Sub(takenAt))
	g.Expect(strings.Count(failed.Status.FailureMessage, "access denied")).To(Equal(1))
}

// failedInPhase is the phase a failed move was in when it failed.
func failedInPhase(mo *movev1alpha1.MoveOperation) movev1alpha1.MovePhase {
	ts := mo.Status.PhaseTransitions
	for i := 1; i < len(ts); i++ {
		if ts[i].Phase == movev1alpha1.PhaseRollingBack || ts[i].Phase == movev1alpha1.PhaseFailed {
			return ts[i-1].Phase
		}
	}
	return ""
}

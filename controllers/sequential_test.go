//go:build cluster

package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// Moving the workload namespaces copies the ClusterClass they use from its
// own namespace and keeps it in the source, for Clusters that stay. Moving
// that namespace later finds those copies in the target: they are the
// earlier move's, unchanged since, and are taken as already copied.
func TestALaterMoveTakesTheCopiesAnEarlierMoveMadeAndLeftUnchanged(t *testing.T) {
	movetest.EnsureSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := NewWithT(t)
	prefix := "seq" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 3, Workers: ptr.To(1), Namespaces: []string{prefix}, Name: prefix})
	workloads, classes := f.Namespaces[:1], f.Namespaces[1:]
	classesBefore := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, classes), classes...)
	g.Expect(classesBefore.Objects).NotTo(BeEmpty())

	movetest.StartOperator(t, movetest.OperatorOptions{})
	ns := movetest.OpsNamespace(t)
	first := movetest.NewMoveOperation(t, ns, "workloads", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: workloads})
	movetest.WaitForPhase(t, first, movev1alpha1.PhaseDone, 3*time.Minute)
	copies := uidsIn(ctx, g, classes)
	g.Expect(copies).To(HaveLen(len(classesBefore.Objects)), "the first move copied the class namespace and kept it in the source")

	second := movetest.NewMoveOperation(t, ns, "classes", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: classes})
	movetest.WaitForPhase(t, second, movev1alpha1.PhaseDone, 3*time.Minute)

	g.Expect(uidsIn(ctx, g, classes)).To(Equal(copies), "the earlier copies are taken as they are, not made again")
	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, classes), classes...)
	if diff := snapshot.Diff(classesBefore, after); diff != "" {
		t.Fatalf("the class namespace in the target differs from the source before the moves:\n%s", diff)
	}
	g.Expect(movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, classes), classes...).Objects).To(BeEmpty(), "the second move took the class namespace out of the source")
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, f.Namespaces)
}

// uidsIn maps every object of the namespaces in the target to its UID.
func uidsIn(ctx context.Context, g Gomega, namespaces []string) map[string]types.UID {
	out := map[string]types.UID{}
	g.Expect(movetest.ForEachObject(ctx, movetest.Env.Target.Client, namespaces, func(u unstructured.Unstructured) {
		if u.GetNamespace() != "" {
			out[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u.GetUID()
		}
	})).To(Succeed())
	return out
}

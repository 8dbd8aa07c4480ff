//go:build cluster

package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/gitops"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/gitopscrds"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// The GitOps managers, at the versions their CRDs store.
var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	helmReleaseGVK   = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
	applicationGVK   = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
)

var gitOpsCRDs struct {
	sync.Once
	err error
}

// ensureGitOpsCRDs installs Flux's and Argo CD's CRDs, from their pinned
// modules, in both clusters, once per test binary. No Flux or Argo CD
// controller runs: the tests check what the operator did to the managers.
func ensureGitOpsCRDs(t *testing.T) {
	t.Helper()
	movetest.EnsureSetup(t)
	gitOpsCRDs.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
			if err := gitopscrds.Install(ctx, m.Config); err != nil {
				gitOpsCRDs.err = fmt.Errorf("%s: %w", m.Name, err)
				return
			}
		}
	})
	if gitOpsCRDs.err != nil {
		t.Fatalf("installing the GitOps CRDs: %v", gitOpsCRDs.err)
	}
}

// gitOpsFleet is a one-cluster fleet whose objects GitOps tools manage:
//
//   - the Cluster, by the Kustomization "clusters" in the fleet's own
//     namespace (a namespace the move takes: the Kustomization stays in
//     the source), which reconciles (spec.suspend unset);
//   - the MachineDeployment, by the Kustomization "paused" that its user
//     has suspended (spec.suspend: true);
//   - the cluster's CA Secret, by the HelmRelease "workers", which
//     reconciles (spec.suspend: false, set explicitly);
//   - the kubeconfig Secret, by an Argo CD Application with automated sync
//     (named in the tracking-id annotation without its namespace, as Argo
//     CD does for Applications in its own namespace), which an app of apps
//     (root, with automated sync and self-heal) applies;
//   - the sa Secret, by a Kustomization "gone" that does not exist.
type gitOpsFleet struct {
	f *fleet.Fleet
	// ops holds the MoveOperations; tools the HelmRelease, the
	// Application and the suspended Kustomization.
	ops, tools string
	app, root  string
	// managers are the managers that exist, by name, as created.
	managers map[string]*unstructured.Unstructured
}

func newGitOpsFleet(t *testing.T, prefix string) *gitOpsFleet {
	ensureGitOpsCRDs(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := prefix + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	gf := &gitOpsFleet{
		f: f, ops: movetest.OpsNamespace(t), tools: testenv.NewNamespace(t, movetest.Env.Source, "tools"),
		app: "fleet-" + rand.String(5), root: "root-" + rand.String(5), managers: map[string]*unstructured.Unstructured{},
	}
	ns, cluster := f.Clusters[0].Namespace, f.Clusters[0].Name
	fluxSource := map[string]any{"kind": "GitRepository", "name": "management"}
	gf.create(t, kustomizationGVK, ns, "clusters", nil, map[string]any{"interval": "5m", "prune": true, "sourceRef": fluxSource, "path": "./clusters"})
	gf.create(t, kustomizationGVK, gf.tools, "paused", nil, map[string]any{"interval": "5m", "prune": true, "sourceRef": fluxSource, "suspend": true})
	gf.create(t, helmReleaseGVK, gf.tools, "workers", nil, map[string]any{"interval": "10m", "suspend": false, "chart": map[string]any{"spec": map[string]any{
		"chart": "workers", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"},
	}}})
	gf.create(t, applicationGVK, gf.tools, gf.root, nil, map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": gf.tools},
		"source":      map[string]any{"repoURL": "https://git.example.com/fleet.git", "path": "apps"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"selfHeal": true}},
	})
	appOfApps := map[string]string{gitops.ArgoTrackingIDAnnotation: fmt.Sprintf("%s:argoproj.io/Application:%s/%s", gf.root, gf.tools, gf.app)}
	gf.create(t, applicationGVK, gf.tools, gf.app, appOfApps, map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		"source":      map[string]any{"repoURL": "https://git.example.com/fleet.git", "path": "clusters", "targetRevision": "main"},
		"syncPolicy": map[string]any{
			"automated":   map[string]any{"prune": true, "selfHeal": true},
			"syncOptions": []any{"ServerSideApply=true"},
		},
	})

	var mds unstructured.UnstructuredList
	mds.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeploymentList"})
	g.Expect(movetest.Env.Source.Client.List(ctx, &mds, client.InNamespace(ns))).To(Succeed())
	g.Expect(mds.Items).NotTo(BeEmpty(), "the fleet's cluster has a MachineDeployment")

	flux := func(kind, namespace, name string) map[string]any {
		return map[string]any{"labels": map[string]any{kind + ".toolkit.fluxcd.io/name": name, kind + ".toolkit.fluxcd.io/namespace": namespace}}
	}
	manage(t, "cluster.x-k8s.io/v1beta2", "Cluster", ns, cluster, flux("kustomize", ns, "clusters"))
	manage(t, "cluster.x-k8s.io/v1beta2", "MachineDeployment", ns, mds.Items[0].GetName(), flux("kustomize", gf.tools, "paused"))
	manage(t, "v1", "Secret", ns, cluster+"-ca", flux("helm", gf.tools, "workers"))
	manage(t, "v1", "Secret", ns, cluster+"-kubeconfig", map[string]any{"annotations": map[string]any{
		gitops.ArgoTrackingIDAnnotation: fmt.Sprintf("%s:/Secret:%s/%s-kubeconfig", gf.app, ns, cluster),
	}})
	manage(t, "v1", "Secret", ns, cluster+"-sa", flux("kustomize", gf.tools, "gone"))
	return gf
}

// create creates a manager and keeps it as created.
func (gf *gitOpsFleet) create(t *testing.T, gvk schema.GroupVersionKind, ns, name string, annotations map[string]string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(annotations)
	if err := movetest.Env.Source.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	t.Cleanup(func() { _ = movetest.Env.Source.Client.Delete(context.Background(), u) })
	gf.managers[name] = u
}

// manage writes a GitOps tool's labels or annotations on an object, as the
// tool does when it applies it.
func manage(t *testing.T, apiVersion, kind, ns, name string, metadata map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	patch, _ := json.Marshal(map[string]any{"metadata": metadata})
	if err := movetest.Env.Source.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("labelling %s %s/%s as GitOps-managed: %v", kind, ns, name, err)
	}
}

// manager reads a manager as it is now.
func (gf *gitOpsFleet) manager(g Gomega, name string) *unstructured.Unstructured {
	before := gf.managers[name]
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(before.GroupVersionKind())
	g.Expect(movetest.Env.Source.Client.Get(context.Background(), client.ObjectKeyFromObject(before), u)).To(Succeed())
	return u
}

// assertAsCreated checks that every manager has the spec and annotations it
// was created with: whatever the move changed, it gave back exactly.
func (gf *gitOpsFleet) assertAsCreated(g Gomega) {
	for name, before := range gf.managers {
		now := gf.manager(g, name)
		g.Expect(now.Object["spec"]).To(Equal(before.Object["spec"]), "the spec of %s %s", before.GetKind(), name)
		g.Expect(now.GetAnnotations()).To(Equal(before.GetAnnotations()), "the annotations of %s %s", before.GetKind(), name)
	}
}

// recordOn returns what the operator recorded on a manager, and by which
// operation.
func recordOn(g Gomega, u *unstructured.Unstructured) (operation string, value json.RawMessage) {
	raw, ok := u.GetAnnotations()[movev1alpha1.OriginalGitOpsSyncAnnotation]
	g.Expect(ok).To(BeTrue(), "%s %s carries the record of what it had", u.GetKind(), u.GetName())
	var rec struct {
		Operation string          `json:"operation"`
		Value     json.RawMessage `json:"value"`
	}
	g.Expect(json.Unmarshal([]byte(raw), &rec)).To(Succeed())
	return rec.Operation, rec.Value
}

// wantReport is what status.plan.gitOps says of gitOpsFleet's managers,
// with the states those that reconcile are reported in.
func (gf *gitOpsFleet) wantReport(reconciling movev1alpha1.GitOpsManagerState) []movev1alpha1.GitOpsManager {
	ns := gf.f.Namespaces[0]
	return []movev1alpha1.GitOpsManager{
		{Kind: "Application.argoproj.io", Namespace: gf.tools, Name: gf.app, Objects: 1, State: reconciling},
		{Kind: "Application.argoproj.io", Namespace: gf.tools, Name: gf.root, Objects: 0, State: reconciling,
			Manages: []string{"Application.argoproj.io " + gf.tools + "/" + gf.app}},
		{Kind: "HelmRelease.helm.toolkit.fluxcd.io", Namespace: gf.tools, Name: "workers", Objects: 1, State: reconciling},
		{Kind: "Kustomization.kustomize.toolkit.fluxcd.io", Namespace: ns, Name: "clusters", Objects: 1, State: reconciling},
		{Kind: "Kustomization.kustomize.toolkit.fluxcd.io", Namespace: gf.tools, Name: "gone", Objects: 1, State: movev1alpha1.GitOpsNotFound},
		{Kind: "Kustomization.kustomize.toolkit.fluxcd.io", Namespace: gf.tools, Name: "paused", Objects: 1, State: movev1alpha1.GitOpsSuspended},
	}
}

// resourceVersionsOfManagers maps each manager to its resourceVersion.
func (gf *gitOpsFleet) resourceVersionsOfManagers(g Gomega) map[string]string {
	out := map[string]string{}
	for name := range gf.managers {
		out[name] = gf.manager(g, name).GetResourceVersion()
	}
	return out
}

// TestGitOpsManagedObjectsStopTheMoveByDefaultAndADryRunReportsTheirManagers:
// a move of objects that Flux and Argo CD manage fails in Validating, by
// default, with a reason of its own naming the managers, and writes
// nothing; a dry run with spec.gitOps: Suspend reports each manager (found
// or not, reconciling or already suspended) in status.plan and suspends
// none.
func TestGitOpsManagedObjectsStopTheMoveByDefaultAndADryRunReportsTheirManagers(t *testing.T) {
	gf := newGitOpsFleet(t, "gitops-refuse")
	ctx := context.Background()
	g := NewWithT(t)
	versions := movetest.ResourceVersions(ctx, g, movetest.Env.Source, gf.f.Namespaces)
	managerVersions := gf.resourceVersionsOfManagers(g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, gf.ops, "move", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: gf.f.Namespaces})
	g.Expect(movetest.Get(g, mo).Spec.GitOps).To(Equal(movev1alpha1.GitOpsRefuse), "Refuse is the default")
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 2*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonGitOpsManaged))
	for _, name := range []string{"Kustomization.kustomize.toolkit.fluxcd.io " + gf.f.Namespaces[0] + "/clusters", "HelmRelease.helm.toolkit.fluxcd.io " + gf.tools + "/workers",
		"Application.argoproj.io " + gf.tools + "/" + gf.app, gf.tools + "/gone", "spec.gitOps: Suspend",
		fmt.Sprintf("Application.argoproj.io %s/%s (applies Application.argoproj.io %s/%s, Reconciling)", gf.tools, gf.root, gf.tools, gf.app)} {
		g.Expect(failed.Status.FailureMessage).To(ContainSubstring(name))
	}
	g.Expect(failed.Status.Plan.GitOps).NotTo(BeNil())
	g.Expect(failed.Status.Plan.GitOps.Items).To(Equal(gf.wantReport(movev1alpha1.GitOpsReconciling)))
	g.Expect(failed.Status.Plan.GitOps.Managers).To(BeEquivalentTo(6))
	g.Expect(failed.Status.Plan.GitOps.ManagedObjects).To(BeEquivalentTo(5))
	g.Expect(failed.Status.PhaseTransitions).NotTo(ContainElement(HaveField("Phase", movev1alpha1.PhaseRecording)), "nothing is written before Validating ends")
	movetest.AssertNothingWritten(g)
	g.Expect(movetest.ResourceVersions(ctx, g, movetest.Env.Source, gf.f.Namespaces)).To(Equal(versions), "no object of the fleet was written")
	g.Expect(gf.resourceVersionsOfManagers(g)).To(Equal(managerVersions), "no manager was written")
	movetest.DeleteMoveOperation(t, mo)

	dry := movetest.NewMoveOperation(t, gf.ops, "dry", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: gf.f.Namespaces, DryRun: true, GitOps: movev1alpha1.GitOpsSuspend,
	})
	done, _ := movetest.WaitForPhase(t, dry, movev1alpha1.PhaseDone, 2*time.Minute)
	g.Expect(done.Status.Plan.GitOps.Items).To(Equal(gf.wantReport(movev1alpha1.GitOpsReconciling)))
	warnings := strings.Join(done.Status.Plan.Warnings, "\n")
	g.Expect(warnings).To(ContainSubstring("would be suspended"))
	g.Expect(warnings).To(ContainSubstring(gf.tools + "/gone (1 objects, NotFound): named by moved objects, not found in the source cluster"))
	movetest.AssertNothingWritten(g)
	g.Expect(movetest.ResourceVersions(ctx, g, movetest.Env.Source, gf.f.Namespaces)).To(Equal(versions), "the dry run wrote no object of the fleet")
	g.Expect(gf.resourceVersionsOfManagers(g)).To(Equal(managerVersions), "the dry run suspended no manager")
}

// TestSuspendedGitOpsManagersStaySuspendedAfterTheMove: with spec.gitOps:
// Suspend, the reconciling managers are suspended in the source (the
// Kustomization in a namespace the move takes too), each with a record of
// what it had; they stay so after Done, and the Ready condition says what
// to do next. The one its user had suspended is not written at all.
func TestSuspendedGitOpsManagersStaySuspendedAfterTheMove(t *testing.T) {
	gf := newGitOpsFleet(t, "gitops-suspend")
	g := NewWithT(t)
	pausedVersion := gf.manager(g, "paused").GetResourceVersion()

	// Every manager is suspended before the move's first write to a
	// Cluster API object.
	var (
		mu    sync.Mutex
		order []string
	)
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: func(cluster, _ string, obj client.Object) {
		gvk := obj.GetObjectKind().GroupVersionKind()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case cluster == "source" && strings.HasSuffix(gvk.Group, "cluster.x-k8s.io") && gvk.Group != movev1alpha1.GroupVersion.Group:
			order = append(order, "capi")
		case gvk.Group == kustomizationGVK.Group || gvk.Group == helmReleaseGVK.Group || gvk.Group == applicationGVK.Group:
			order = append(order, "gitops")
		}
	}})
	mo := movetest.NewMoveOperation(t, gf.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: gf.f.Namespaces, GitOps: movev1alpha1.GitOpsSuspend,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

	mu.Lock()
	firstCAPI := slices.Index(order, "capi")
	g.Expect(firstCAPI).To(BeNumerically(">=", 0), "the move writes Cluster API objects in the source")
	g.Expect(order[:firstCAPI]).To(Equal([]string{"gitops", "gitops", "gitops", "gitops"}), "the four reconciling managers are suspended before any Cluster API object is written")
	g.Expect(order[firstCAPI:]).NotTo(ContainElement("gitops"), "nothing is written to the managers after the suspension")
	mu.Unlock()

	want := gf.wantReport(movev1alpha1.GitOpsSuspendedForMove)
	g.Expect(done.Status.Plan.GitOps.Items).To(Equal(want))
	ready := conditionOf(done, movev1alpha1.ReadyCondition)
	g.Expect(ready.Message).To(ContainSubstring("stay suspended in the source: point their sources at the target cluster"))
	g.Expect(ready.Message).To(ContainSubstring(gf.tools + "/workers"))

	for _, name := range []string{"clusters", "workers"} {
		k := gf.manager(g, name)
		suspend, _, _ := unstructured.NestedBool(k.Object, "spec", "suspend")
		g.Expect(suspend).To(BeTrue(), "%s stays suspended after the move", name)
		operation, value := recordOn(g, k)
		g.Expect(operation).To(Equal(string(mo.UID)))
		if name == "workers" {
			g.Expect(string(value)).To(Equal("false"), "the HelmRelease had spec.suspend: false")
		} else {
			g.Expect(value).To(BeEmpty(), "the Kustomization had no spec.suspend")
		}
	}
	app := gf.manager(g, gf.app)
	_, hasAutomated, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "syncPolicy", "automated")
	g.Expect(hasAutomated).To(BeFalse(), "the Application has no automated sync after the move")
	syncOptions, _, _ := unstructured.NestedStringSlice(app.Object, "spec", "syncPolicy", "syncOptions")
	g.Expect(syncOptions).To(Equal([]string{"ServerSideApply=true"}), "the rest of the sync policy is untouched")
	_, value := recordOn(g, app)
	g.Expect(string(value)).To(MatchJSON(`{"prune":true,"selfHeal":true}`))
	root := gf.manager(g, gf.root)
	_, hasAutomated, _ = unstructured.NestedFieldNoCopy(root.Object, "spec", "syncPolicy", "automated")
	g.Expect(hasAutomated).To(BeFalse(), "the app of apps, which would put the Application's automated sync back, has none either")
	_, value = recordOn(g, root)
	g.Expect(string(value)).To(MatchJSON(`{"selfHeal":true}`))
	g.Expect(gf.manager(g, "paused").GetResourceVersion()).To(Equal(pausedVersion), "a Kustomization its user suspended is not written")

	assertEvent(g, gf.ops, mo.Name, "Normal", movev1alpha1.ReasonGitOpsSuspended, gf.tools+"/workers")
	movetest.DeleteMoveOperation(t, mo)
}

// TestAGitOpsSuspensionIsUndoneExactlyByARollbackAcrossCrashes: the
// operator crashes right after it suspended the managers (before it wrote
// anything else); the next one resumes the move without recording its
// predecessor's suspension as what the managers had, and the move then
// fails in Copying and rolls back; that operator crashes half-way through
// giving the managers back, and a third finishes. Every manager ends as it
// was: the Application with its exact automated policy, the HelmRelease
// with spec.suspend: false, the Kustomization without spec.suspend, the one
// its user suspended still suspended; none keeps a record.
func TestAGitOpsSuspensionIsUndoneExactlyByARollbackAcrossCrashes(t *testing.T) {
	gf := newGitOpsFleet(t, "gitops-rb")
	g := NewWithT(t)
	isManager := func(obj client.Object) bool {
		gvk := obj.GetObjectKind().GroupVersionKind()
		return gvk.Group == kustomizationGVK.Group || gvk.Group == helmReleaseGVK.Group || gvk.Group == applicationGVK.Group
	}

	// First: crash at the first write after the fourth suspension.
	var suspended atomic.Int32
	first := movetest.StartOperator(t, movetest.OperatorOptions{
		CrashIf: func(w movetest.PendingWrite) bool { return suspended.Load() == 4 && !isManager(w.Obj) },
		OnWrite: func(_, _ string, obj client.Object) {
			if isManager(obj) {
				suspended.Add(1)
			}
		},
	})
	mo := movetest.NewMoveOperation(t, gf.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: gf.f.Namespaces, GitOps: movev1alpha1.GitOpsSuspend,
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Millisecond}},
	})
	g.Eventually(first.Crashed.Load, 2*time.Minute, 50*time.Millisecond).Should(BeTrue(), "the operator must crash after suspending the managers")
	first.Stop()
	g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRecording), "the crash left the move in Recording, with its status not yet written")

	// Second: the target refuses every create, so Copying fails and the
	// move rolls back; it crashes after giving the first manager back.
	var (
		rollingBack atomic.Bool
		restored    atomic.Int32
		recorded    atomic.Int32
	)
	second := movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, _ client.Object) error {
			if cluster == "target" && verb == "create" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "", errors.New("fault injected by the test"))
			}
			return nil
		},
		CrashIf: func(w movetest.PendingWrite) bool { return isManager(w.Obj) && restored.Load() == 1 },
		OnWrite: func(_, verb string, obj client.Object) {
			if mo, ok := obj.(*movev1alpha1.MoveOperation); ok && verb == "patch/status" && mo.Status.Phase == movev1alpha1.PhaseRollingBack {
				rollingBack.Store(true)
			}
			if !isManager(obj) {
				return
			}
			if rollingBack.Load() {
				restored.Add(1)
			} else {
				recorded.Add(1)
			}
		},
	})
	g.Eventually(second.Crashed.Load, 3*time.Minute, 50*time.Millisecond).Should(BeTrue(), "the move must roll back and the operator crash giving the managers back")
	second.Stop()
	g.Expect(recorded.Load()).To(BeZero(), "a resumed move writes nothing to managers its predecessor suspended")
	g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack))

	movetest.StartOperator(t, movetest.OperatorOptions{})
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, 3*time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonCopyTimeout))
	gf.assertAsCreated(g)
	g.Expect(failed.Status.Plan.GitOps.Items).To(Equal(gf.wantReport(movev1alpha1.GitOpsReconciling)), "the status no longer says the move holds them suspended")
	movetest.DeleteMoveOperation(t, mo)
}

// TestIgnoredGitOpsManagersKeepRunningWithAWarning: with spec.gitOps:
// Ignore, the move goes through, leaves every manager as it was, and says
// in a Warning event and a plan warning what it ignored.
func TestIgnoredGitOpsManagersKeepRunningWithAWarning(t *testing.T) {
	gf := newGitOpsFleet(t, "gitops-ignore")
	g := NewWithT(t)
	managerVersions := gf.resourceVersionsOfManagers(g)

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, gf.ops, "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: gf.f.Namespaces, GitOps: movev1alpha1.GitOpsIgnore,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(done.Status.Plan.GitOps.Items).To(Equal(gf.wantReport(movev1alpha1.GitOpsReconciling)))
	g.Expect(strings.Join(done.Status.Plan.Warnings, "\n")).To(ContainSubstring("spec.gitOps is Ignore, so they keep running"))
	g.Expect(gf.resourceVersionsOfManagers(g)).To(Equal(managerVersions), "no manager was written")
	assertEvent(g, gf.ops, mo.Name, "Warning", movev1alpha1.ReasonGitOpsIgnored, gf.tools+"/workers")
	movetest.DeleteMoveOperation(t, mo)
}

// assertEvent waits for an event about a MoveOperation with that type and
// reason whose note names what is expected.
func assertEvent(g Gomega, ns, name, eventType, reason, names string) {
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(movetest.Client.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Type == eventType && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(names)))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "a %s event %s names %s", eventType, reason, names)
}

func conditionOf(mo *movev1alpha1.MoveOperation, t string) metav1.Condition {
	for _, c := range mo.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// TestMoreGitOpsManagersThanTheStatusListsAreAllSuspended: the status lists
// the first 50 managers; with 51, the move finds them all again from the
// moved objects' labels when it suspends them, and suspends every one.
func TestMoreGitOpsManagersThanTheStatusListsAreAllSuspended(t *testing.T) {
	ensureGitOpsCRDs(t)
	ctx := context.Background()
	g := NewWithT(t)
	name := "gitops-many" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(0), Namespaces: []string{name}, Name: name})
	ns, clusterName := f.Clusters[0].Namespace, f.Clusters[0].Name
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	g.Expect(movetest.Env.Source.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, cluster)).To(Succeed())
	owner := metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: clusterName, UID: cluster.GetUID()}

	// 51 ConfigMaps of the Cluster's hierarchy, each applied by a
	// Kustomization of its own.
	const managers = 51
	var kustomizations []client.ObjectKey
	for i := range managers {
		k := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"interval": "5m", "prune": true, "sourceRef": map[string]any{"kind": "GitRepository", "name": "management"},
		}}}
		k.SetGroupVersionKind(kustomizationGVK)
		k.SetNamespace(ns)
		k.SetName(fmt.Sprintf("k%02d", i))
		g.Expect(movetest.Env.Source.Client.Create(ctx, k)).To(Succeed())
		kustomizations = append(kustomizations, client.ObjectKeyFromObject(k))
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		cm.SetNamespace(ns)
		cm.SetName(fmt.Sprintf("%s-addon-%02d", clusterName, i))
		cm.SetOwnerReferences([]metav1.OwnerReference{owner})
		cm.SetLabels(map[string]string{gitops.FluxKustomizationNameLabel: k.GetName(), gitops.FluxKustomizationNamespaceLabel: ns})
		g.Expect(movetest.Env.Source.Client.Create(ctx, cm)).To(Succeed())
	}

	movetest.StartOperator(t, movetest.OperatorOptions{})
	mo := movetest.NewMoveOperation(t, movetest.OpsNamespace(t), "move", movev1alpha1.MoveOperationSpec{
		Target: movetest.TargetRef("target"), Namespaces: f.Namespaces, GitOps: movev1alpha1.GitOpsSuspend,
	})
	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(done.Status.Plan.GitOps.Managers).To(BeEquivalentTo(managers))
	g.Expect(done.Status.Plan.GitOps.Items).To(HaveLen(50), "the status lists the first 50")
	for _, key := range kustomizations {
		k := &unstructured.Unstructured{}
		k.SetGroupVersionKind(kustomizationGVK)
		g.Expect(movetest.Env.Source.Client.Get(ctx, key, k)).To(Succeed())
		suspend, _, _ := unstructured.NestedBool(k.Object, "spec", "suspend")
		g.Expect(suspend).To(BeTrue(), "Kustomization %s is suspended, listed in the status or not", key)
	}
	movetest.DeleteMoveOperation(t, mo)
}

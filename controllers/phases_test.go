package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/preflight"
)

// The state machine without clusters: the table's transitions, deletion and
// failure in every phase, and the conditions of every phase × outcome, in
// the style of Cluster API's *_status_test.go.

// allPhases are the phases the API accepts, read from the generated CRD's
// enum of status.phase (not from the table, which the tests check against
// it).
var allPhases = crdPhases()

func crdPhases() []movev1alpha1.MovePhase {
	data, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "move.cluster.x-k8s.io_moveoperations.yaml"))
	if err != nil {
		panic(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		panic(err)
	}
	var out []movev1alpha1.MovePhase
	for _, v := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["phase"].Enum {
		var p string
		if err := json.Unmarshal(v.Raw, &p); err != nil {
			panic(err)
		}
		out = append(out, movev1alpha1.MovePhase(p))
	}
	return out
}

// beforeThePointOfNoReturn are the phases after which nothing is written
// yet (the first two) or that a failure rolls back (the next three).
var (
	nothingWritten = map[movev1alpha1.MovePhase]bool{movev1alpha1.PhasePending: true, movev1alpha1.PhaseValidating: true}
	rolledBack     = map[movev1alpha1.MovePhase]bool{movev1alpha1.PhaseRecording: true, movev1alpha1.PhaseScalingDown: true, movev1alpha1.PhaseCopying: true}
)

// moveIn returns a MoveOperation that entered the phases given, in order.
func moveIn(phases ...movev1alpha1.MovePhase) *movev1alpha1.MoveOperation {
	mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "m", Generation: 1}}
	at := time.Now().Add(-time.Minute)
	for _, p := range phases {
		mo.Status.Phase = p
		mo.Status.PhaseTransitions = append(mo.Status.PhaseTransitions, movev1alpha1.PhaseTransition{Phase: p, Time: metav1.NewTime(at)})
		at = at.Add(time.Second)
	}
	return mo
}

// pathTo returns the phases a move goes through up to p, rolling back from
// Copying.
func pathTo(p movev1alpha1.MovePhase) []movev1alpha1.MovePhase {
	forward := Path()
	switch p {
	case movev1alpha1.PhaseRollingBack:
		return append(forward[:5:5], movev1alpha1.PhaseRollingBack)
	case movev1alpha1.PhaseFailed:
		return append(forward[:5:5], movev1alpha1.PhaseRollingBack, movev1alpha1.PhaseFailed)
	}
	for i, q := range forward {
		if q == p {
			return forward[:i+1]
		}
	}
	panic(fmt.Sprintf("no path to %s", p))
}

func TestThePhaseTableHasOneRowPerPhaseAndLeadsEveryMoveToAnEnd(t *testing.T) {
	if len(phaseOrder) != len(allPhases) || len(phaseTable) != len(allPhases) {
		t.Fatalf("the table has %d rows (%d distinct phases), want one per phase: %d", len(phaseOrder), len(phaseTable), len(allPhases))
	}
	for _, p := range allPhases {
		spec, ok := phaseTable[p]
		switch {
		case !ok:
			t.Errorf("%s has no row", p)
		case p.IsTerminal() && (len(spec.steps) != 0 || spec.next != "" || spec.condition != ""):
			t.Errorf("%s ends a move: it has no step, successor or step condition, got %+v", p, spec)
		case !p.IsTerminal() && (len(spec.steps) == 0 || spec.next == ""):
			t.Errorf("%s needs a step and a successor", p)
		}
	}
	follow := func(dryRun bool, from movev1alpha1.MovePhase) []movev1alpha1.MovePhase {
		mo := moveIn()
		mo.Spec.DryRun = dryRun
		path := []movev1alpha1.MovePhase{from}
		for p := from; !p.IsTerminal(); {
			p = specOf(p).successor(mo)
			path = append(path, p)
			if len(path) > len(allPhases) {
				t.Fatalf("the successors from %s loop: %v", from, path)
			}
		}
		return path
	}
	if got, want := fmt.Sprint(follow(false, movev1alpha1.PhasePending)), "[Pending Validating Recording ScalingDown Copying Deleting RestoringTarget RestoringSource Done]"; got != want {
		t.Errorf("a move goes %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(follow(true, movev1alpha1.PhasePending)), "[Pending Validating Done]"; got != want {
		t.Errorf("a dry run goes %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(follow(false, movev1alpha1.PhaseRollingBack)), "[RollingBack Failed]"; got != want {
		t.Errorf("a rollback goes %s, want %s", got, want)
	}
}

func TestAFailureEndsBeforeAnythingIsWrittenRollsBackBeforeThePointOfNoReturnAndStallsAfterIt(t *testing.T) {
	for _, p := range allPhases {
		if p.IsTerminal() {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			s := newScope(moveIn(pathTo(p)...))
			s.fail("First", "the first failure")
			s.fail("Second", "a later failure")
			got := s.mo.Status
			switch {
			case nothingWritten[p]:
				if got.Phase != movev1alpha1.PhaseFailed {
					t.Errorf("phase %s, want Failed: nothing is written yet", got.Phase)
				}
			case rolledBack[p]:
				if got.Phase != movev1alpha1.PhaseRollingBack {
					t.Errorf("phase %s, want RollingBack: the move has written", got.Phase)
				}
			default:
				if got.Phase != p || s.stalled == nil || s.stalled.reason != "Second" {
					t.Errorf("phase %s, stalled %+v; want %s, stalled for a human: nothing can be undone here", got.Phase, s.stalled, p)
				}
				if got.FailureReason != "" {
					t.Errorf("failure %q recorded where the move cannot fail", got.FailureReason)
				}
				return
			}
			if got.FailureReason != "First" || got.FailureMessage != "the first failure" {
				t.Errorf("failure %q: %q, want the first one kept", got.FailureReason, got.FailureMessage)
			}
		})
	}
}

func TestDeletingTheMoveOperationReleasesRollsBackOrFinishesByPhase(t *testing.T) {
	for _, p := range allPhases {
		t.Run(string(p), func(t *testing.T) {
			mo := moveIn(pathTo(p)...)
			// A dry run holds no claim and no Secret: releasing needs no
			// cluster, and the routing is the same.
			mo.Spec.DryRun = true
			now := metav1.Now()
			mo.DeletionTimestamp = &now
			s := newScope(mo)
			r := &MoveOperationReconciler{}
			onDelete := specOf(p).onDelete
			if onDelete == deletionFinishes {
				if p == movev1alpha1.PhasePending || p.IsTerminal() || nothingWritten[p] || rolledBack[p] {
					t.Fatalf("%s finishes on deletion, want it to release or roll back", p)
				}
				return // the phase's own step runs: see the tests with clusters
			}
			if _, err := r.reconcileDelete(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			switch {
			case p.IsTerminal() || nothingWritten[p]:
				if !s.removeFinalizer || s.mo.Status.Phase != p {
					t.Errorf("phase %s, finalizer removed %v; want it let go at once", s.mo.Status.Phase, s.removeFinalizer)
				}
			case rolledBack[p]:
				if s.removeFinalizer || s.mo.Status.Phase != movev1alpha1.PhaseRollingBack || s.mo.Status.FailureReason != movev1alpha1.ReasonDeletedBeforeCompletion {
					t.Errorf("phase %s (%s), finalizer removed %v; want RollingBack (%s) with the finalizer kept",
						s.mo.Status.Phase, s.mo.Status.FailureReason, s.removeFinalizer, movev1alpha1.ReasonDeletedBeforeCompletion)
				}
			default:
				t.Errorf("%s must finish on deletion: past the point of no return nothing can be undone", p)
			}
		})
	}
}

// outcomes are every outcome a step can report.
var outcomes = map[string]outcome{
	"done":     done(),
	"progress": progressed(),
	"wait":     waitFor(time.Second, "waiting: controller pods still running"),
	"stall":    stallOn(10*time.Second, movev1alpha1.ReasonTargetSecretNotFound, "the Secret is missing"),
	"fail":     failWith(movev1alpha1.ReasonCopyTimeout, "no progress"),
}

// wantAfter is the phase an outcome leads to from p, by the rules the
// table encodes.
func wantAfter(p movev1alpha1.MovePhase, kind string) movev1alpha1.MovePhase {
	switch {
	case kind == "done":
		return specOf(p).next
	case kind == "fail" && nothingWritten[p]:
		return movev1alpha1.PhaseFailed
	case kind == "fail" && rolledBack[p]:
		return movev1alpha1.PhaseRollingBack
	}
	return p
}

func TestEveryOutcomeInEveryPhaseSetsConditionsKstatusReads(t *testing.T) {
	for _, p := range allPhases {
		if p.IsTerminal() {
			continue
		}
		for kind, o := range outcomes {
			t.Run(string(p)+"/"+kind, func(t *testing.T) {
				s := newScope(moveIn(pathTo(p)...))
				res, err := s.apply(specOf(p), o)
				if err != nil {
					t.Fatal(err)
				}
				if res.RequeueAfter <= 0 {
					t.Errorf("requeue %+v: every outcome reconciles again", res)
				}
				setConditions(s, time.Now())
				mo := s.mo
				if want := wantAfter(p, kind); mo.Status.Phase != want {
					t.Fatalf("phase %s, want %s", mo.Status.Phase, want)
				}
				checkStepConditions(t, s)
				checkKstatus(t, s, kstatusOf(t, mo))
			})
		}
	}
}

// checkStepConditions: every phase entered before the current one is True,
// the current one's is False with what it waits for or why it stalls.
func checkStepConditions(t *testing.T, s *scope) {
	t.Helper()
	mo := s.mo
	current := specOf(mo.Status.Phase)
	if current.condition == "" {
		return
	}
	c := meta.FindStatusCondition(mo.Status.Conditions, current.condition)
	if c == nil {
		t.Fatalf("no %s condition in phase %s", current.condition, mo.Status.Phase)
	}
	switch {
	case s.stalled != nil:
		if c.Status != metav1.ConditionFalse || c.Reason != s.stalled.reason {
			t.Errorf("%s = %s (%s), want False (%s)", c.Type, c.Status, c.Reason, s.stalled.reason)
		}
	case s.waiting != "":
		if c.Status != metav1.ConditionFalse || c.Message != s.waiting {
			t.Errorf("%s = %s %q, want False saying what it waits for: %q", c.Type, c.Status, c.Message, s.waiting)
		}
	case c.Status != metav1.ConditionFalse || c.Reason != movev1alpha1.ReasonProgressing:
		t.Errorf("%s = %s (%s), want False (Progressing)", c.Type, c.Status, c.Reason)
	}
	for _, t2 := range mo.Status.PhaseTransitions[:len(mo.Status.PhaseTransitions)-1] {
		done := specOf(t2.Phase).condition
		if done == "" || t2.Phase == movev1alpha1.PhaseRollingBack {
			continue
		}
		if d := meta.FindStatusCondition(mo.Status.Conditions, done); d == nil || (d.Status != metav1.ConditionTrue && d.Reason != mo.Status.FailureReason) {
			t.Errorf("%s of the earlier phase %s is %+v, want True (or False with the failure that ended it)", done, t2.Phase, d)
		}
	}
}

// checkKstatus: Failed and stalled moves are Failed to kstatus, a move in
// progress is InProgress, and a Ready one Current.
func checkKstatus(t *testing.T, s *scope, got status.Status) {
	t.Helper()
	want := status.InProgressStatus
	switch {
	case s.mo.Status.Phase == movev1alpha1.PhaseDone:
		want = status.CurrentStatus
	case s.mo.Status.Phase == movev1alpha1.PhaseFailed, s.stalled != nil:
		want = status.FailedStatus
	}
	if got != want {
		t.Errorf("kstatus %s, want %s; conditions %+v", got, want, s.mo.Status.Conditions)
	}
}

func kstatusOf(t *testing.T, mo *movev1alpha1.MoveOperation) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(movev1alpha1.GroupVersion.String())
	u.SetKind("MoveOperation")
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func TestAStepThatReportsNothingIsAnError(t *testing.T) {
	s := newScope(moveIn(pathTo(movev1alpha1.PhaseCopying)...))
	if _, err := s.apply(specOf(movev1alpha1.PhaseCopying), outcome{}); err == nil || !strings.Contains(err.Error(), "no outcome") {
		t.Fatalf("got %v, want an error: a step must say what happened", err)
	}
}

func TestValidatingFailsNamingEveryFindingAndWaitsWhenTheFirstIsForAHuman(t *testing.T) {
	findings := []preflight.Finding{
		{Check: "namespaces", Reason: movev1alpha1.ReasonNamespaceNotFound, Message: `namespace "gone" does not exist`},
		{Check: "target", Reason: movev1alpha1.ReasonTargetSecretNotFound, Message: "Secret ops/target not found", Retry: true},
		{Check: "plan", Reason: movev1alpha1.ReasonOrphanedObjects, Message: "Secret fleet/s has no owner"},
	}
	o, stop := verdict(findings)
	if !stop || o.kind != outcomeFail || o.reason != movev1alpha1.ReasonNamespaceNotFound {
		t.Fatalf("got %+v, want a failure with the first finding's reason", o)
	}
	for _, f := range findings {
		if !strings.Contains(o.message, f.Message) {
			t.Errorf("the failure %q does not name %q", o.message, f.Message)
		}
	}
	o, stop = verdict(findings[1:])
	if !stop || o.kind != outcomeStall || o.reason != movev1alpha1.ReasonTargetSecretNotFound {
		t.Errorf("got %+v, want the move stalled until the Secret is fixed", o)
	}
	if _, stop := verdict(nil); stop {
		t.Error("no finding must let the move go on")
	}
}

// rbacDenied is the 403 the API server returns when RBAC refuses a request.
func rbacDenied(verb, resource, group, namespace string) error {
	msg := fmt.Sprintf(`User "system:serviceaccount:move-operator-system:move-operator-controller-manager" cannot %s resource %q in API group %q`, verb, resource, group)
	if namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", namespace)
	} else {
		msg += " at the cluster scope"
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, "x", errors.New(msg))
}

func TestAnAuthorizersRefusalFailsTheMoveAtOnceWhereTheTableSaysAndAnyOther403IsRetried(t *testing.T) {
	webhook := apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}, "c1",
		errors.New(`admission webhook "validation.cluster.cluster.x-k8s.io" denied the request: spec.topology is immutable`))
	for _, tc := range []struct {
		name  string
		phase movev1alpha1.MovePhase
		err   error
		// want is the phase after; stalled says the move waits for a
		// human with AccessDenied; retried says the error goes back to
		// the controller's backoff.
		want    movev1alpha1.MovePhase
		stalled bool
		retried bool
	}{{
		name:  "a list RBAC refuses in Validating fails the move, nothing being written",
		phase: movev1alpha1.PhaseValidating,
		err:   fmt.Errorf("check plan: reading the objects to move: %w", rbacDenied("list", "baremetalhosts", "metal3.io", "")),
		want:  movev1alpha1.PhaseFailed,
	}, {
		name:  "a create RBAC refuses while Copying rolls the move back at once",
		phase: movev1alpha1.PhaseCopying,
		err:   fmt.Errorf("copying group 1: %w", rbacDenied("create", "machines", "cluster.x-k8s.io", "ns1")),
		want:  movev1alpha1.PhaseRollingBack,
	}, {
		name:    "a delete RBAC refuses past the point of no return stalls the move for a human",
		phase:   movev1alpha1.PhaseDeleting,
		err:     rbacDenied("delete", "machines", "cluster.x-k8s.io", "ns1"),
		want:    movev1alpha1.PhaseDeleting,
		stalled: true,
	}, {
		name:    "a refusal while rolling back stalls the move for a human",
		phase:   movev1alpha1.PhaseRollingBack,
		err:     rbacDenied("delete", "namespaces", "", ""),
		want:    movev1alpha1.PhaseRollingBack,
		stalled: true,
	}, {
		name:    "an admission webhook's 403 while Copying is retried as before",
		phase:   movev1alpha1.PhaseCopying,
		err:     fmt.Errorf("copying group 1: %w", webhook),
		want:    movev1alpha1.PhaseCopying,
		retried: true,
	}, {
		name:    "any other error is retried as before",
		phase:   movev1alpha1.PhaseValidating,
		err:     errors.New("connection refused"),
		want:    movev1alpha1.PhaseValidating,
		retried: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScope(moveIn(pathTo(tc.phase)...))
			res, err := s.applyError(specOf(tc.phase), tc.err)
			mo := s.mo
			if mo.Status.Phase != tc.want {
				t.Fatalf("phase %s, want %s", mo.Status.Phase, tc.want)
			}
			if tc.retried {
				if !errors.Is(err, tc.err) || !strings.Contains(s.waiting, "retrying") || mo.Status.FailureReason != "" || s.stalled != nil {
					t.Errorf("error %v, waiting %q, failure %q, stalled %+v: want the error retried and said in the status", err, s.waiting, mo.Status.FailureReason, s.stalled)
				}
				return
			}
			if err != nil || res.RequeueAfter <= 0 {
				t.Errorf("result %+v, error %v: a refusal is an outcome, reconciled again", res, err)
			}
			reason, message := mo.Status.FailureReason, mo.Status.FailureMessage
			if tc.stalled {
				if s.stalled == nil {
					t.Fatal("not stalled")
				}
				reason, message = s.stalled.reason, s.stalled.message
				if res.RequeueAfter < time.Second {
					t.Errorf("requeue after %v: a stalled move waits for a human, not a hot loop", res.RequeueAfter)
				}
			}
			if reason != movev1alpha1.ReasonAccessDenied {
				t.Errorf("reason %q, want %q", reason, movev1alpha1.ReasonAccessDenied)
			}
			for _, w := range []string{"access denied", "system:serviceaccount:move-operator-system:move-operator-controller-manager", "- apiGroups: [", "verbs: ["} {
				if !strings.Contains(message, w) {
					t.Errorf("message %q lacks %q", message, w)
				}
			}
			setConditions(s, time.Now())
			checkKstatus(t, s, kstatusOf(t, mo))
		})
	}
}

func TestThePathOfASuccessfulMoveIsTheTablesSuccessorsFromPendingToDone(t *testing.T) {
	path := Path()
	if len(path) < 2 || path[0] != movev1alpha1.PhasePending || path[len(path)-1] != movev1alpha1.PhaseDone {
		t.Fatalf("the path is %v, want Pending … Done", path)
	}
	mo := moveIn()
	for i := 1; i < len(path); i++ {
		if next := specOf(path[i-1]).successor(mo); next != path[i] {
			t.Errorf("after %s the table leads to %s, the path says %s", path[i-1], next, path[i])
		}
	}
}

// A backup and a restore go through the move's table, leaving out the
// phases of the cluster they do not have, and run their own sub-steps
// where their work differs; a move runs none of theirs.
func TestABackupAndARestoreTakeTheMovesPathWithoutThePhasesOfTheClusterTheyLack(t *testing.T) {
	P := movev1alpha1.PhasePending
	backup := &movev1alpha1.MoveOperation{Spec: movev1alpha1.MoveOperationSpec{Target: movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, Unencrypted: true}}}}
	restore := &movev1alpha1.MoveOperation{Spec: movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{Directory: &movev1alpha1.DirectoryStore{}, Location: "a"}}}}
	for _, c := range []struct {
		mo   *movev1alpha1.MoveOperation
		want []movev1alpha1.MovePhase
	}{
		{moveIn(), []movev1alpha1.MovePhase{P, movev1alpha1.PhaseValidating, movev1alpha1.PhaseRecording, movev1alpha1.PhaseScalingDown, movev1alpha1.PhaseCopying, movev1alpha1.PhaseDeleting, movev1alpha1.PhaseRestoringTarget, movev1alpha1.PhaseRestoringSource, movev1alpha1.PhaseDone}},
		{backup, []movev1alpha1.MovePhase{P, movev1alpha1.PhaseValidating, movev1alpha1.PhaseRecording, movev1alpha1.PhaseScalingDown, movev1alpha1.PhaseCopying, movev1alpha1.PhaseRestoringSource, movev1alpha1.PhaseDone}},
		{restore, []movev1alpha1.MovePhase{P, movev1alpha1.PhaseValidating, movev1alpha1.PhaseRecording, movev1alpha1.PhaseScalingDown, movev1alpha1.PhaseCopying, movev1alpha1.PhaseRestoringTarget, movev1alpha1.PhaseDone}},
	} {
		if got := PathOf(c.mo); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("the path of %s is %v, want %v", kindOfOperation(c.mo), got, c.want)
		}
	}
	for _, p := range phaseOrder {
		if len(p.steps) == 0 {
			continue
		}
		if got := p.stepsOf(moveIn()); &got[0] != &p.steps[0] {
			t.Errorf("a move runs other sub-steps than the table's in %s", p.phase)
		}
		for _, mo := range []*movev1alpha1.MoveOperation{backup, restore} {
			steps := p.stepsOf(mo)
			if len(steps) == 0 {
				t.Errorf("a %s runs no sub-step in %s", kindOfOperation(mo), p.phase)
			}
		}
	}
	// What differs: a backup writes the archive, a restore reads it.
	names := func(steps []subStep) (out []string) {
		for _, st := range steps {
			out = append(out, st.name)
		}
		return out
	}
	if got := names(copyingPhase.stepsOf(backup)); !strings.Contains(strings.Join(got, ","), "write the archive") {
		t.Errorf("a backup's Copying runs %v, no write of the archive", got)
	}
	if got := names(validatingPhase.stepsOf(restore)); fmt.Sprint(got) != "[check]" || &validatingPhase.stepsOf(restore)[0] == &validatingPhase.steps[0] {
		t.Errorf("a restore's Validating runs the move's checks: %v", got)
	}
}

func kindOfOperation(mo *movev1alpha1.MoveOperation) string {
	switch {
	case mo.Spec.IsRestore():
		return "restore"
	case mo.Spec.Target.IsBackup():
		return "backup"
	}
	return "move"
}

// Where the move's controllers are meant to be at zero (and so where a
// webhook that lost its bypass gets it back) is a column of the table.
func TestTheControllersAreDownFromScalingDownToDeletingAndInARollbacksTargetUntilItIsCleared(t *testing.T) {
	both := map[movev1alpha1.MovePhase]bool{movev1alpha1.PhaseScalingDown: true, movev1alpha1.PhaseCopying: true, movev1alpha1.PhaseDeleting: true}
	r := &MoveOperationReconciler{}
	for _, p := range allPhases {
		for _, role := range []movev1alpha1.ClusterRole{movev1alpha1.ClusterSource, movev1alpha1.ClusterTarget} {
			for _, st := range []struct {
				name                          string
				sourceRestored, targetCleared bool
			}{{"before the source is restored", false, false}, {"once the source is restored", true, false}, {"once the target is cleared", true, true}} {
				s := &scope{mo: moveIn(pathTo(p)...)}
				s.mo.UID = types.UID(fmt.Sprintf("%s-%s-%t-%t", p, role, st.sourceRestored, st.targetCleared))
				mem := r.memoOf(s.mo.UID)
				if st.sourceRestored {
					mem.finish(movev1alpha1.PhaseRollingBack, sourceRestored)
				}
				if st.targetCleared {
					mem.finish(movev1alpha1.PhaseRollingBack, targetCleared)
				}
				want := both[p] || (p == movev1alpha1.PhaseRollingBack && role == movev1alpha1.ClusterTarget && st.sourceRestored && !st.targetCleared)
				if got := r.controllersDown(s, role); got != want {
					t.Errorf("in %s, %s cluster, %s: controllers down %t, want %t", p, role, st.name, got, want)
				}
			}
		}
	}
}

// A step's error is retried, but before the point of no return not for
// ever: the rows that write before it bound their errors with a timeout of
// the spec, and the driver turns an error that outlasts it into the row's
// failure, naming the timeout.
func TestAnErrorThatOutlastsItsRowsBoundFailsTheMoveNamingTheTimeout(t *testing.T) {
	bounded := map[movev1alpha1.MovePhase]struct{ reason, says string }{
		movev1alpha1.PhaseRecording:   {movev1alpha1.ReasonRecordingTimeout, "Recording still failed after 5m0s (spec.timeouts.scaleDown)"},
		movev1alpha1.PhaseScalingDown: {movev1alpha1.ReasonScaleDownTimeout, "ScalingDown still failed after 15m0s (spec.timeouts.blockMove + spec.timeouts.scaleDown)"},
		movev1alpha1.PhaseCopying:     {movev1alpha1.ReasonCopyTimeout, "Copying made no progress for 10m0s (spec.timeouts.copy)"},
	}
	for _, row := range phaseOrder {
		t.Run(string(row.phase), func(t *testing.T) {
			want, ok := bounded[row.phase]
			if !ok {
				if row.errorBound != nil {
					t.Fatalf("%s bounds its errors; only the phases that write before the point of no return do", row.phase)
				}
				return
			}
			if row.errorBound == nil {
				t.Fatalf("%s retries an error for ever with the move half-done", row.phase)
			}
			r := &MoveOperationReconciler{}
			err := errors.New("etcdserver: request timed out")
			s := newScope(moveIn(pathTo(row.phase)...))
			if _, outlasted := row.outlasted(r, s, err); outlasted {
				t.Fatal("an error of a phase begun a minute ago outlasted its bound")
			}
			for i := range s.mo.Status.PhaseTransitions {
				s.mo.Status.PhaseTransitions[i].Time = metav1.NewTime(time.Now().Add(-time.Hour))
			}
			o, outlasted := row.outlasted(r, s, err)
			if !outlasted || o.kind != outcomeFail || o.reason != want.reason {
				t.Fatalf("outcome %+v, outlasted %v: want a failure with %s", o, outlasted, want.reason)
			}
			for _, w := range []string{want.says, "rolled back", err.Error()} {
				if !strings.Contains(o.message, w) {
					t.Errorf("message %q lacks %q", o.message, w)
				}
			}
		})
	}
}

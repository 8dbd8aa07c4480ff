package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/planrecord"
)

// The decisions inside Copying and RollingBack, without clusters: each
// case drives the steps of Copying or RollingBack on a source and a
// target held by fake clients (fakes_test.go) and checks what the step
// decides (go on, wait, fail with which reason, or return an error to be
// retried), what it counts in status.progress, and what it leaves in each
// cluster, in the style of clusterctl's Test_objectMover_move. The tests
// with clusters (rollback_test.go, crash_test.go, ...) show the same
// behaviours end to end; these show each decision alone, in milliseconds.

// kindNames names the outcome kinds in what a failing test says.
var kindNames = map[outcomeKind]string{
	0: "no outcome", outcomeDone: "done", outcomeProgress: "progress", outcomeWait: "wait", outcomeStall: "stall", outcomeFail: "fail",
}

// expectation is what one reconcile of a step should report.
type expectation struct {
	kind outcomeKind
	// reason is the failure's reason.
	reason string
	// retried is set when the step returns an error, retried with the
	// controller's backoff, and reports no outcome.
	retried bool
	// says are words that the message of the outcome, or the error, holds.
	says []string
}

// check fails the test when a reconcile reported o and err, not what e
// expects.
func (e expectation) check(t *testing.T, o outcome, err error) {
	t.Helper()
	g := NewWithT(t)
	if e.retried {
		g.Expect(err).To(HaveOccurred(), "want an error to retry, got %s", kindNames[o.kind])
		g.Expect(o.kind).To(BeZero(), "an error reports no outcome")
		for _, w := range e.says {
			g.Expect(err.Error()).To(ContainSubstring(w))
		}
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindNames[o.kind]).To(Equal(kindNames[e.kind]), "outcome %+v", o)
	g.Expect(o.reason).To(Equal(e.reason), "outcome %+v", o)
	for _, w := range e.says {
		g.Expect(o.message).To(ContainSubstring(w))
	}
}

func TestCopyingCopiesOneGroupPerReconcileCountingItInTheStatusThenIsDone(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	began := time.Now()
	for i, step := range []struct {
		want expectation
		// groups and objects are status.progress.copiedGroups and copied
		// after the reconcile.
		groups, objects int32
	}{
		{want: expectation{kind: outcomeProgress}},                        // the run starts Copying
		{want: expectation{kind: outcomeProgress}, groups: 1, objects: 1}, // the Cluster
		{want: expectation{kind: outcomeProgress}, groups: 2, objects: 3}, // the MachineSet and the Secret
		{want: expectation{kind: outcomeProgress}, groups: 3, objects: 4}, // the Machine
		{want: expectation{kind: outcomeDone}, groups: 3, objects: 4},     // the source holds the same set, the controllers are still down
	} {
		o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
		step.want.check(t, o, err)
		var copied []objectRef
		for _, group := range copiedByGroup[:step.groups] {
			copied = append(copied, group...)
		}
		g.Expect(f.target.holds(t, theCluster, theMachineSet, theSecret, theMachine)).To(ConsistOf(refStrings(copied...)),
			"reconcile %d: the target holds the groups copied so far", i+1)
		p := f.mo.Status.Progress
		g.Expect(p).NotTo(BeNil())
		g.Expect([]int32{p.CopiedGroups, p.Copied, p.CopyStarts}).To(Equal([]int32{step.groups, step.objects, 1}),
			"reconcile %d: copiedGroups, copied and copyStarts", i+1)
		if step.groups == 0 {
			g.Expect(p.LastProgressTime).To(BeNil(), "nothing is copied yet")
		} else {
			g.Expect(p.LastProgressTime.Time).To(BeTemporally(">=", began), "a group copied further is progress")
			g.Expect(p.Total).To(Equal(int32(4)))
		}
	}
}

func TestCopyingRollsBackAtOnceWhenTheTargetOrTheSourceChangedUnderIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// inTarget is in the target before the move copies anything.
		inTarget []client.Object
		// copied is how many groups are copied before change.
		copied int32
		change func(f *moveFixture)
		want   expectation
		// untouched is in the target, not the move's: nothing writes it.
		untouched *objectRef
	}{{
		name:      "an object the move did not make, in the target when Copying records the plan, is a conflict and nothing is recorded",
		inTarget:  []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}, somebodysMachine()},
		change:    func(*moveFixture) {},
		want:      expectation{kind: outcomeFail, reason: movev1alpha1.ReasonTargetConflict, says: []string{"fleet/c1-md-0", "appeared in the target since the move validated", "the move is rolled back"}},
		untouched: &theMachine,
	}, {
		name: "a creator who may not read an object of the plan Copying builds (granted when the move validated, taken away since) fails the move, and nothing is recorded",
		change: func(f *moveFixture) {
			f.source.refuseWith(func(r fakeRequest) error {
				if r.verb == "review get" && (r.kind == "secrets" || r.kind == "*") || r.verb == "review *" {
					return errors.New("refused")
				}
				return nil
			})
		},
		want:      expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCreatorNotAllowed, says: []string{`creator "alice" may not get secrets c1-kubeconfig in namespace fleet`, "asked again of the source as Copying found it", "nothing was copied"}},
		untouched: &theCluster,
	}, {
		name: "the admission policy that vouches for the creator, deleted since the move validated, fails the move, and nothing is recorded",
		change: func(f *moveFixture) {
			policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: creator.PolicyName}}
			NewWithT(f.t).Expect(f.source.raw.Delete(context.Background(), policy)).To(Succeed())
		},
		want:      expectation{kind: outcomeFail, reason: movev1alpha1.ReasonAdmissionPolicyMissing, says: []string{"is not installed in the source", "nothing was copied"}},
		untouched: &theCluster,
	}, {
		name:      "an object the move did not make, put in the target after the plan was recorded, is a conflict when its group is copied",
		copied:    2,
		change:    func(f *moveFixture) { f.putTarget(somebodysMachine()) },
		want:      expectation{kind: outcomeFail, reason: movev1alpha1.ReasonTargetConflict, says: []string{"fleet/c1-md-0", "not created by this move", "the move is rolled back"}},
		untouched: &theMachine,
	}, {
		name:   "an object deleted from the source since the plan was recorded fails the move when its group is copied",
		copied: 1,
		change: func(f *moveFixture) { f.deleteSource(theMachineSet) },
		want:   expectation{kind: outcomeFail, reason: movev1alpha1.ReasonObjectsChanged, says: []string{"fleet/c1-md", "the move is rolled back", "create a new MoveOperation"}},
	}, {
		name:   "an object replaced in the source since the plan was recorded (its name, another UID) fails the move when its group is copied",
		copied: 1,
		change: func(f *moveFixture) {
			f.deleteSource(theMachineSet)
			replacement := capiObject(machineSetGVK, theMachineSet.name)
			replacement.SetUID("uid-machineset-c1-md-again")
			f.createSource(replacement)
		},
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonObjectsChanged, says: []string{"fleet/c1-md", "uid-machineset-c1-md-again", "the move is rolled back"}},
	}, {
		name:   "an object created in a moved hierarchy while the move copied fails the move once the last group is copied",
		copied: 3,
		change: func(f *moveFixture) {
			owner := capiObject(machineSetGVK, theMachineSet.name)
			f.createSource(capiObject(machineGVK, "c1-md-1", owner))
		},
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonObjectsChanged, says: []string{"fleet/c1-md-1", "appeared in the source while the move copied", "the move is rolled back"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMoveFixture(t, tc.inTarget...)
			f.copyGroups(tc.copied)
			tc.change(f)
			before := *f.mo.Status.Progress

			o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
			tc.want.check(t, o, err)
			g.Expect(f.mo.Status.Progress.CopiedGroups).To(Equal(before.CopiedGroups), "the failed group is not counted")
			if tc.untouched != nil {
				g.Expect(f.journal.written("target", *tc.untouched)).To(BeFalse(), "the move wrote what it did not make:\n%s", f.journal)
			}

			s := newScope(f.mo)
			_, err = s.apply(specOf(movev1alpha1.PhaseCopying), o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.mo.Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack), "before the point of no return a failure rolls back")
			g.Expect(f.mo.Status.FailureReason).To(Equal(tc.want.reason))
			if tc.copied == 0 {
				recorded, err := planrecord.Exists(context.Background(), f.source, operationNamespace, f.mo.UID)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(recorded).To(BeFalse(), "a plan that meets a conflict is not recorded")
			}
		})
	}
}

func TestAnErrorThatPersistsRollsCopyingBackOnlyOnceNothingWasCopiedForTheCopyTimeout(t *testing.T) {
	etcdDown := apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	targetDown := func(f *moveFixture) {
		f.target.refuseWith(func(r fakeRequest) error {
			if r.verb == "create" {
				return etcdDown
			}
			return nil
		})
	}
	for _, tc := range []struct {
		name string
		// began is how long Copying (the phase, and this run's start of
		// it) has gone on when the groups are copied.
		began time.Duration
		// copied is how many groups are then copied; since is how long
		// ago the last one was when the error comes.
		copied int32
		since  time.Duration
		// timeout is spec.timeouts.copy, the default when zero.
		timeout time.Duration
		refuse  func(f *moveFixture)
		want    expectation
	}{{
		name:   "an error as Copying begins is retried, saying by when the move rolls back",
		refuse: targetDown,
		want:   expectation{retried: true, says: []string{"copying group 1 of 3 to the target https://target.invalid:6443", "the move rolls back if it makes no progress by", "etcdserver: request timed out"}},
	}, {
		name:   "an error 9 minutes after the last group was copied is retried",
		copied: 1, since: 9 * time.Minute,
		refuse: targetDown,
		want:   expectation{retried: true, says: []string{"copying group 2 of 3", "etcdserver: request timed out"}},
	}, {
		name:   "an error 11 minutes after the last group was copied rolls the move back",
		copied: 1, since: 11 * time.Minute,
		refuse: targetDown,
		want:   expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyTimeout, says: []string{"Copying made no progress for 10m0s (spec.timeouts.copy)", "etcdserver: request timed out"}},
	}, {
		name:  "an error 11 minutes after Copying began, before it copied anything, rolls the move back",
		began: 11 * time.Minute, refuse: targetDown,
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyTimeout, says: []string{"no progress for 10m0s"}},
	}, {
		name:  "the bound counts from the last group copied, not from when Copying began",
		began: 30 * time.Minute, copied: 1, since: time.Minute,
		refuse: targetDown,
		want:   expectation{retried: true, says: []string{"copying group 2 of 3"}},
	}, {
		name:   "spec.timeouts.copy sets the bound",
		copied: 1, since: 11 * time.Minute, timeout: 30 * time.Minute,
		refuse: targetDown,
		want:   expectation{retried: true, says: []string{"copying group 2 of 3"}},
	}, {
		name:  "a record of the plan the source refuses to write is bounded as well",
		began: 11 * time.Minute,
		refuse: func(f *moveFixture) {
			f.source.refuseWith(func(r fakeRequest) error {
				if r.verb == "create" && r.kind == "ConfigMap" {
					return etcdDown
				}
				return nil
			})
		},
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyTimeout, says: []string{"recording the plan", "etcdserver: request timed out"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMoveFixture(t)
			if tc.timeout > 0 {
				f.mo.Spec.Timeouts.Copy = &metav1.Duration{Duration: tc.timeout}
			}
			o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying)) // the run starts Copying
			expectation{kind: outcomeProgress}.check(t, o, err)
			f.elapse(tc.began)
			f.copyGroups(tc.copied)
			f.elapse(tc.since)
			tc.refuse(f)

			o, err = f.reconcile(specOf(movev1alpha1.PhaseCopying))
			tc.want.check(t, o, err)
			g.Expect(f.mo.Status.Progress.CopiedGroups).To(Equal(tc.copied))
		})
	}
}

func TestATargetThatRefusesTheCredentialWaitsForANewOneInTheSecretAndCopiesOnWithItAtOnce(t *testing.T) {
	revoked := func(r fakeRequest) error { return apierrors.NewUnauthorized("Unauthorized") }
	for _, tc := range []struct {
		name   string
		since  time.Duration
		rotate bool
		want   expectation
	}{{
		name: "a Secret that still holds the refused credential is an error that says what to mend",
		want: expectation{retried: true, says: []string{
			"refuses the credential of Secret ops/target-kubeconfig (401 Unauthorized", "put a valid kubeconfig in the Secret", "rolls back if it makes no progress by",
		}},
	}, {
		name: "the refused credential for longer than spec.timeouts.copy rolls the move back",
		// The Secret's credential was refused for 11 minutes.
		since: 11 * time.Minute,
		want:  expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyTimeout, says: []string{"no progress for 10m0s", "401 Unauthorized"}},
	}, {
		name:   "a Secret that holds a new credential already is used at once, without the backoff of an error",
		rotate: true,
		want:   expectation{kind: outcomeWait, says: []string{"copying on with the new kubeconfig of the target Secret"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMoveFixture(t)
			f.copyGroups(1)
			f.elapse(tc.since)
			refuse := revoked
			if tc.rotate {
				// Whatever refreshes the credential puts a new one in the
				// Secret as the target stops taking the old one.
				var rotated sync.Once
				refuse = func(r fakeRequest) error {
					rotated.Do(f.rotateTargetCredential)
					return revoked(r)
				}
			}
			f.target.refuseWith(refuse)

			o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
			tc.want.check(t, o, err)
			g.Expect(f.mo.Status.Progress.CopiedGroups).To(Equal(int32(1)))
			if !tc.rotate {
				return
			}
			g.Expect(o.after).To(BeNumerically("<=", time.Millisecond), "the new credential is tried at once")
			// The target accepts the new credential: the next reconcile
			// copies the next group, keeping what was copied.
			f.target.refuseWith(nil)
			o, err = f.reconcile(specOf(movev1alpha1.PhaseCopying))
			expectation{kind: outcomeProgress}.check(t, o, err)
			g.Expect(f.mo.Status.Progress.CopiedGroups).To(Equal(int32(2)), "the copy goes on where it was")
		})
	}
}

func TestAnOperatorRestartedWhileCopyingRollsBackOnlyOnceItKeepsCopyingNothingFurtherPastTheTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// starts is status.progress.copyStarts before this run; zero is
		// the first run, with no progress yet.
		starts int32
		// sinceFurther is how long ago a group was last copied further
		// than before, zero when none ever was; Copying began 30 minutes
		// ago unless began says otherwise.
		sinceFurther, began time.Duration
		want                expectation
	}{{
		name: "the first run of Copying counts one start",
		want: expectation{kind: outcomeProgress},
	}, {
		name:   "a single restart long after the last progress goes on: it copies every group again, which may take long",
		starts: 1, sinceFurther: 20 * time.Minute,
		want: expectation{kind: outcomeProgress},
	}, {
		name:   "a third start past the timeout goes on",
		starts: 2, sinceFurther: 20 * time.Minute,
		want: expectation{kind: outcomeProgress},
	}, {
		name:   "a fourth start within the timeout goes on",
		starts: 3, sinceFurther: 9 * time.Minute,
		want: expectation{kind: outcomeProgress},
	}, {
		name:   "a fourth start past the timeout rolls the move back, saying the operator keeps stopping",
		starts: 3, sinceFurther: 20 * time.Minute,
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyInterrupted, says: []string{
			"started Copying 4 times without copying more than 1 groups (1 objects)", "nothing further was copied for 10m0s (spec.timeouts.copy)", "killed for exceeding its memory limit",
		}},
	}, {
		name:   "a fourth start of a Copying that never copied a group counts from when Copying began",
		starts: 3, began: 11 * time.Minute,
		want: expectation{kind: outcomeFail, reason: movev1alpha1.ReasonCopyInterrupted},
	}, {
		name:   "a fourth start of a Copying begun within the timeout goes on",
		starts: 3, began: 9 * time.Minute,
		want: expectation{kind: outcomeProgress},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMoveFixture(t)
			began := tc.began
			if began == 0 {
				began = 30 * time.Minute
			}
			f.enteredCopying(began)
			if tc.starts > 0 {
				f.mo.Status.Progress = &movev1alpha1.MoveProgress{Total: 4, CopyStarts: tc.starts}
				if tc.sinceFurther > 0 {
					f.mo.Status.Progress.CopiedGroups, f.mo.Status.Progress.Copied = 1, 1
					f.mo.Status.Progress.LastProgressTime = ptrTime(time.Now().Add(-tc.sinceFurther))
				}
			}

			o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
			tc.want.check(t, o, err)
			g.Expect(f.mo.Status.Progress.CopyStarts).To(Equal(tc.starts+1), "each run counts its start before anything else")
		})
	}
}

func TestARestartedOperatorCopiesEveryGroupAgainAndCountsProgressOnlyOnceItCopiesFurther(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	f.copyGroups(2)
	f.restartOperator()
	f.elapse(time.Minute)
	further := f.mo.Status.Progress.LastProgressTime.DeepCopy()

	etcdDown := apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	for i, step := range []struct {
		// refused is set when the target refuses to create anything.
		refused bool
		// groups and starts are status.progress.copiedGroups and
		// copyStarts after the reconcile; further is set when it copied
		// a group further than the run before the restart.
		groups, starts int32
		further        bool
	}{
		{groups: 2, starts: 2},                // the restarted run counts its start
		{refused: true, groups: 2, starts: 2}, // its first copy fails: what the run before copied stays counted
		{groups: 2, starts: 2},                // the Cluster again: the copy is there, the move's own
		{groups: 2, starts: 2},                // the MachineSet and the Secret again
		{groups: 3, starts: 1, further: true}, // the Machine: further than before
	} {
		want := expectation{kind: outcomeProgress}
		f.target.refuseWith(nil)
		if step.refused {
			want = expectation{retried: true, says: []string{"copying group 1 of 3"}}
			f.target.refuseWith(func(r fakeRequest) error {
				if r.verb == "create" {
					return etcdDown
				}
				return nil
			})
		}
		o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
		want.check(t, o, err)
		p := f.mo.Status.Progress
		g.Expect([]int32{p.CopiedGroups, p.CopyStarts}).To(Equal([]int32{step.groups, step.starts}), "reconcile %d: copiedGroups and copyStarts", i+1)
		if step.further {
			g.Expect(p.LastProgressTime.After(further.Time)).To(BeTrue(), "a group copied further is progress")
		} else {
			g.Expect(p.LastProgressTime).To(Equal(further), "copying again what was copied is not progress")
		}
	}
	o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
	expectation{kind: outcomeDone}.check(t, o, err)
}

func TestARollbackRestoresTheSourceFirstThenDeletesFromTheTargetOnlyTheCopiesThisMoveMade(t *testing.T) {
	for _, tc := range []struct {
		name string
		// inTarget is in the target before the move copies anything.
		inTarget []client.Object
		// fail brings the move to RollingBack.
		fail func(f *moveFixture)
		// deleted are gone from the target after the rollback, kept are
		// still there.
		deleted, kept []objectRef
	}{{
		name: "after a conflict partway: the copies go, the object that conflicted and its namespace stay",
		fail: func(f *moveFixture) {
			f.copyGroups(2)
			f.putTarget(somebodysMachine())
			f.reconcileAndApply()
		},
		deleted: []objectRef{theCluster, theMachineSet, theSecret},
		kept:    []objectRef{theMachine, theNamespace},
	}, {
		name: "by a restarted operator: the plan and the copies are read back from their records, and the namespace the move made goes too",
		fail: func(f *moveFixture) {
			f.copyGroups(2)
			f.restartOperator()
			newScope(f.mo).fail(movev1alpha1.ReasonCopyTimeout, "no progress")
		},
		deleted: []objectRef{theCluster, theMachineSet, theSecret, theNamespace},
	}, {
		name:     "with no plan recorded (the move failed before its first copy): nothing is deleted from the target",
		inTarget: []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}, somebodysMachine()},
		fail: func(f *moveFixture) {
			f.copyGroups(0)
			f.reconcileAndApply()
		},
		kept: []objectRef{theMachine, theNamespace},
	}, {
		name: "after every group was copied: every copy goes",
		fail: func(f *moveFixture) {
			f.copyGroups(3)
			f.createSource(capiObject(machineGVK, "c1-md-1", capiObject(machineSetGVK, theMachineSet.name)))
			f.reconcileAndApply()
		},
		deleted: []objectRef{theCluster, theMachineSet, theSecret, theMachine, theNamespace},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newMoveFixture(t, tc.inTarget...)
			tc.fail(f)
			g.Expect(f.mo.Status.Phase).To(Equal(movev1alpha1.PhaseRollingBack))
			reason := f.mo.Status.FailureReason
			f.journal.reset()

			o, err := f.reconcile(specOf(movev1alpha1.PhaseRollingBack))
			expectation{kind: outcomeDone}.check(t, o, err)

			g.Expect(f.target.holds(t, tc.deleted...)).To(BeEmpty(), "what the move made is deleted from the target")
			g.Expect(f.target.holds(t, tc.kept...)).To(ConsistOf(refStrings(tc.kept...)), "what the move did not make stays in the target")
			g.Expect(f.source.holds(t, theCluster, theMachineSet, theSecret, theMachine)).To(HaveLen(4), "the source keeps every object")
			g.Expect(f.source.paused(t)).To(BeFalse(), "the source's Cluster is unpaused")
			g.Expect([]int32{f.source.replicas(t), f.target.replicas(t)}).To(Equal([]int32{1, 1}), "both clusters' controllers run again")
			f.journal.expectBefore(t, "source ", "target ", "the source is restored before anything is written to the target")
			if len(tc.deleted) > 0 {
				f.journal.expectBefore(t, "target delete", "target patch Deployment", "the target's controllers come back once the copies are gone")
			}

			s := newScope(f.mo)
			_, err = s.apply(specOf(movev1alpha1.PhaseRollingBack), o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.mo.Status.Phase).To(Equal(movev1alpha1.PhaseFailed))
			g.Expect(f.mo.Status.FailureReason).To(Equal(reason), "the failure that rolled the move back is kept")
		})
	}
}

func TestARollbackLeavesTheTargetAloneUntilTheSourcesControllersAreAvailable(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	f.copyGroups(2)
	newScope(f.mo).fail(movev1alpha1.ReasonCopyTimeout, "no progress")
	f.source.stallRollouts()
	f.journal.reset()

	o, err := f.reconcile(specOf(movev1alpha1.PhaseRollingBack))
	expectation{kind: outcomeWait, says: []string{"Source controllers not yet Available", "capi-system/capi-controller-manager"}}.check(t, o, err)
	g.Expect(f.journal.index("target ", false)).To(Equal(-1), "nothing is written to the target while the source waits:\n%s", f.journal)
	g.Expect(f.target.holds(t, theCluster, theMachineSet, theSecret)).To(HaveLen(3))

	f.source.finishRollouts(t)
	o, err = f.reconcile(specOf(movev1alpha1.PhaseRollingBack))
	expectation{kind: outcomeDone}.check(t, o, err)
	g.Expect(f.target.holds(t, theCluster, theMachineSet, theSecret)).To(BeEmpty())
}

func TestARollbackThatCannotClearTheTargetSaysTheSourceIsRestoredAndKeepsTheTargetsControllersDownUntilItIs(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	f.copyGroups(2)
	newScope(f.mo).fail(movev1alpha1.ReasonCopyTimeout, "no progress")
	f.target.refuseWith(func(r fakeRequest) error {
		if r.verb == "delete" {
			return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		return nil
	})

	o, err := f.reconcile(specOf(movev1alpha1.PhaseRollingBack))
	expectation{retried: true, says: []string{"the source is restored; deleting what the move created in the target", "etcdserver: request timed out"}}.check(t, o, err)
	g.Expect([]int32{f.source.replicas(t), f.target.replicas(t)}).To(Equal([]int32{1, 0}), "the source runs again; the target's controllers wait for its copies to go")

	f.target.refuseWith(nil)
	o, err = f.reconcile(specOf(movev1alpha1.PhaseRollingBack))
	expectation{kind: outcomeDone}.check(t, o, err)
	g.Expect(f.target.holds(t, theCluster, theMachineSet, theSecret, theNamespace)).To(BeEmpty())
	g.Expect(f.target.replicas(t)).To(Equal(int32(1)), "the target's controllers come back once its copies are gone")
}

func TestTheSourcesProvidersStartAsSoonAsTheTargetsAreScaledUpNotOnceTheyAreAvailable(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	f.mo.Status.Phase = movev1alpha1.PhaseRestoringTarget
	f.mo.Status.PhaseTransitions = append(f.mo.Status.PhaseTransitions,
		movev1alpha1.PhaseTransition{Phase: movev1alpha1.PhaseDeleting, Time: metav1.Now()},
		movev1alpha1.PhaseTransition{Phase: movev1alpha1.PhaseRestoringTarget, Time: metav1.Now()})
	f.target.stallRollouts()
	f.journal.reset()

	o, err := f.reconcile(specOf(movev1alpha1.PhaseRestoringTarget))
	expectation{kind: outcomeWait, says: []string{"Target controllers not yet Available"}}.check(t, o, err)
	g.Expect(f.source.replicas(t)).To(Equal(int32(1)), "the source's provider starts while the target's is starting:\n%s", f.journal)
	f.journal.expectBefore(t, "target patch Deployment", "source patch Deployment", "the target's providers are scaled up first")

	// Looking again while the target's pods start scales nothing again.
	f.journal.reset()
	o, err = f.reconcile(specOf(movev1alpha1.PhaseRestoringTarget))
	expectation{kind: outcomeWait}.check(t, o, err)
	g.Expect(f.journal.index("source patch Deployment", false)).To(Equal(-1), "the source's providers are started once:\n%s", f.journal)
}

// TestALookAtTheStoppedControllersListsThemOnceInEachCluster: a wait reads
// the Deployments of the controllers it waits for with one LIST per
// cluster and look (look.New), not a GET each, and
// takes the answer to the patch that scaled one for what it is now.
func TestALookAtTheStoppedControllersListsThemOnceInEachCluster(t *testing.T) {
	g := NewWithT(t)
	f := newMoveFixture(t)
	f.mo.Status.Phase = movev1alpha1.PhaseRestoringTarget
	f.mo.Status.PhaseTransitions = append(f.mo.Status.PhaseTransitions,
		movev1alpha1.PhaseTransition{Phase: movev1alpha1.PhaseDeleting, Time: metav1.Now()},
		movev1alpha1.PhaseTransition{Phase: movev1alpha1.PhaseRestoringTarget, Time: metav1.Now()})
	f.target.stallRollouts()
	var mu sync.Mutex
	reads := map[string]int{}
	for _, c := range []*fakeCluster{f.source, f.target} {
		c.refuseWith(func(r fakeRequest) error {
			if r.kind == "Deployment" || strings.HasSuffix(r.kind, "WebhookConfiguration") {
				mu.Lock()
				reads[fmt.Sprintf("%s %s %s", c.role, r.verb, r.kind)]++
				mu.Unlock()
			}
			return nil
		})
	}

	o, err := f.reconcile(specOf(movev1alpha1.PhaseRestoringTarget))
	expectation{kind: outcomeWait, says: []string{"Target controllers not yet Available"}}.check(t, o, err)
	mu.Lock()
	// The first look of the run: the providers are listed, scaled up
	// (the source's too, once the target's are), and their managers are
	// looked for (cluster-api-operator's labelled Deployments and the
	// webhooks of its API); the preamble lists the webhooks once too, to
	// follow the operator's identity there.
	g.Expect(reads).To(Equal(map[string]int{
		"Target list Deployment": 2, "Target patch Deployment": 1,
		"Target list ValidatingWebhookConfiguration": 2, "Target list MutatingWebhookConfiguration": 2,
		"Source list Deployment": 2, "Source patch Deployment": 1,
		"Source list ValidatingWebhookConfiguration": 2, "Source list MutatingWebhookConfiguration": 2,
	}), "the first look's reads and writes")
	clear(reads)
	mu.Unlock()

	// Every later look of the wait: one list of the target's providers.
	// The managers are those the run found already (see managersSeen).
	o, err = f.reconcile(specOf(movev1alpha1.PhaseRestoringTarget))
	expectation{kind: outcomeWait, says: []string{"Target controllers not yet Available"}}.check(t, o, err)
	mu.Lock()
	defer mu.Unlock()
	g.Expect(reads).To(Equal(map[string]int{"Target list Deployment": 1}), "a later look's reads and writes")
}

// TestTheOperatorAsksWhoItIsOncePerClientOfARun: the bypass, the check of
// a shared identity and following a rotated credential all ask who the
// operator is; a client's answer never changes, so a run asks it once per
// client, and asks a new client (a rotated kubeconfig) again.
func TestTheOperatorAsksWhoItIsOncePerClientOfARun(t *testing.T) {
	g := NewWithT(t)
	var asked atomic.Int32
	// A pointer, as the clients client.New builds are: a wrapper of
	// another type is asked every time.
	type clusterClient struct{ client.Client }
	newClient := func() client.Client {
		return &clusterClient{fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if review, ok := obj.(*authenticationv1.SelfSubjectReview); ok {
					asked.Add(1)
					review.Status.UserInfo.Username = operatorUsername
					return nil
				}
				return c.Create(ctx, obj, opts...)
			},
		}).Build()}
	}
	r := &MoveOperationReconciler{}
	s := newScope(moveIn(pathTo(movev1alpha1.PhaseScalingDown)...))
	first, rotated := newClient(), newClient()
	for _, c := range []client.Client{first, first, rotated, first, rotated} {
		who, err := r.whoAmI(context.Background(), s, c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(who.Username).To(Equal(operatorUsername))
	}
	g.Expect(asked.Load()).To(Equal(int32(2)), "one SelfSubjectReview per client")
}

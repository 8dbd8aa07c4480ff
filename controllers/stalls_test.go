package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// stalledMove is a move rolling back whose target refuses every request
// as RBAC does: a rollback has nowhere to fail to, so every reconcile
// stalls it with AccessDenied until the target grants the rules again. Its
// reconciles go through Reconcile, on a fake client holding the
// MoveOperation, by a clock the test sets.
type stalledMove struct {
	*moveFixture
	client   client.Client
	recorder *events.FakeRecorder
	clock    time.Time
}

func newStalledMove(t *testing.T, name string) *stalledMove {
	t.Helper()
	f := newMoveFixture(t)
	mo := f.mo
	mo.Name = name
	mo.Finalizers = []string{movev1alpha1.MoveOperationFinalizer}
	mo.Status.FailureReason, mo.Status.FailureMessage = movev1alpha1.ReasonCopyTimeout, "copying made no progress"
	newScope(mo).enter(movev1alpha1.PhaseRollingBack)
	m := &stalledMove{
		moveFixture: f,
		client: fake.NewClientBuilder().WithScheme(newFakeScheme()).WithObjects(mo).
			WithStatusSubresource(&movev1alpha1.MoveOperation{}).Build(),
		clock: time.Now(),
	}
	m.restart()
	f.target.refuseWith(func(r fakeRequest) error {
		return rbacDenied(r.verb, strings.ToLower(r.kind)+"s", "", "")
	})
	return m
}

// restart replaces the reconciler with one that remembers nothing, as a
// restarted operator, past the source's restore (done before the stall).
func (m *stalledMove) restart() {
	m.restartOperator()
	m.r.Client = m.client
	m.recorder = events.NewFakeRecorder(100)
	m.r.Recorder = m.recorder
	m.r.clock = func() time.Time { return m.clock }
	mem := m.r.memoOf(m.mo.UID)
	mem.finish(movev1alpha1.PhaseRollingBack, sourceRestored)
	mem.finish(anyPhase, sourceIdentityFollowed)
}

// reconcileAt reconciles the move when the clock says at, and returns the
// events it recorded.
func (m *stalledMove) reconcileAt(t *testing.T, at time.Time) []string {
	t.Helper()
	m.clock = at
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m.mo)}
	if _, err := m.r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconciling at %s: %v", at, err)
	}
	return recorded(m.recorder)
}

// recorded returns the events recorded since it was last called.
func recorded(recorder *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// stalledCondition returns the stored MoveOperation's Stalled condition.
func (m *stalledMove) stalledCondition(t *testing.T) *metav1.Condition {
	t.Helper()
	mo := &movev1alpha1.MoveOperation{}
	if err := m.client.Get(context.Background(), client.ObjectKeyFromObject(m.mo), mo); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(mo.Status.Conditions, movev1alpha1.StalledCondition)
}

// stalledGauge reads move_operator_moves_stalled for a phase and reason.
func stalledGauge(t *testing.T, phase movev1alpha1.MovePhase, reason string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := movesStalled.WithLabelValues(string(phase), reason).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func TestAStalledMoveRecordsAWarningAtOnceThenOnceAnIntervalAndIsCountedWhileStalled(t *testing.T) {
	m := newStalledMove(t, "stalled-then-granted")
	before := stalledGauge(t, movev1alpha1.PhaseRollingBack, movev1alpha1.ReasonAccessDenied)
	gauge := func(want float64, when string) {
		t.Helper()
		if got := stalledGauge(t, movev1alpha1.PhaseRollingBack, movev1alpha1.ReasonAccessDenied) - before; got != want {
			t.Errorf("%s: move_operator_moves_stalled{phase=RollingBack,reason=AccessDenied} is %v more than before, want %v", when, got, want)
		}
	}
	start := m.clock

	got := m.reconcileAt(t, start)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+movev1alpha1.ReasonAccessDenied+" stalled in phase RollingBack since ") {
		t.Fatalf("the stall recorded %q, want one Warning event with the Stalled condition's reason", got)
	}
	if c := m.stalledCondition(t); c == nil || c.Status != metav1.ConditionTrue || c.Reason != movev1alpha1.ReasonAccessDenied {
		t.Fatalf("Stalled condition %+v, want True with reason %s", c, movev1alpha1.ReasonAccessDenied)
	}
	gauge(1, "stalled")

	for _, after := range []time.Duration{30 * time.Second, time.Minute, stallEventInterval - time.Second} {
		if got := m.reconcileAt(t, start.Add(after)); len(got) != 0 {
			t.Errorf("%s into the stall, before the interval, recorded %q; want nothing", after, got)
		}
	}
	gauge(1, "still stalled, reconciled four times")
	if got := m.reconcileAt(t, start.Add(stallEventInterval)); len(got) != 1 || !strings.HasPrefix(got[0], "Warning AccessDenied") {
		t.Errorf("once the interval has passed the stall recorded %q, want its Warning event again", got)
	}
	if got := m.reconcileAt(t, start.Add(stallEventInterval+time.Minute)); len(got) != 0 {
		t.Errorf("a minute after the repetition the stall recorded %q, want nothing", got)
	}

	m.target.refuseWith(nil) // a human grants the rules again
	if got := m.reconcileAt(t, start.Add(stallEventInterval+2*time.Minute)); strings.Contains(strings.Join(got, "\n"), "AccessDenied") {
		t.Errorf("the move, no longer refused, recorded %q", got)
	}
	// The rollback goes on, and here ends: Failed, which kstatus reads as
	// Stalled with the failure's reason, but a move that ended is no
	// longer waiting for anyone.
	if c := m.stalledCondition(t); c != nil && c.Reason == movev1alpha1.ReasonAccessDenied {
		t.Fatalf("Stalled condition %+v once the target grants the rules, want AccessDenied gone", c)
	}
	gauge(0, "no longer stalled")
	failed := stalledGauge(t, movev1alpha1.PhaseFailed, movev1alpha1.ReasonCopyTimeout)
	if failed != 0 {
		t.Errorf("a Failed move is counted as stalled: %v", failed)
	}
}

func TestARestartedOperatorRepeatsAStallsEventOnlyAtTheNextIntervalSinceTheStallBegan(t *testing.T) {
	m := newStalledMove(t, "stalled-across-a-restart")
	start := m.clock
	if got := m.reconcileAt(t, start); len(got) != 1 {
		t.Fatalf("the stall recorded %q, want one event", got)
	}
	if got := m.reconcileAt(t, start.Add(stallEventInterval+30*time.Second)); len(got) != 1 {
		t.Fatalf("the first interval recorded %q, want one event", got)
	}

	// The process exits, its gauge with it; the next one remembers nothing
	// but what the status says: stalled since start.
	m.r.stalls.forget(client.ObjectKeyFromObject(m.mo))
	m.restart()
	before := stalledGauge(t, movev1alpha1.PhaseRollingBack, movev1alpha1.ReasonAccessDenied)
	for _, after := range []time.Duration{stallEventInterval + time.Minute, 2*stallEventInterval - time.Second} {
		if got := m.reconcileAt(t, start.Add(after)); len(got) != 0 {
			t.Errorf("the restarted operator, %s into the stall, recorded %q; want nothing before %s", after, got, 2*stallEventInterval)
		}
	}
	if got := stalledGauge(t, movev1alpha1.PhaseRollingBack, movev1alpha1.ReasonAccessDenied) - before; got != 1 {
		t.Errorf("the restarted operator counts the stalled move %v times, want once", got)
	}
	if got := m.reconcileAt(t, start.Add(2*stallEventInterval)); len(got) != 1 {
		t.Errorf("the restarted operator, two intervals into the stall, recorded %q; want the event again", got)
	}

	// Deleted (its finalizer gone, as a rollback that ended removes it),
	// the move is counted no more.
	ctx := context.Background()
	mo := &movev1alpha1.MoveOperation{}
	if err := m.client.Get(ctx, client.ObjectKeyFromObject(m.mo), mo); err != nil {
		t.Fatal(err)
	}
	mo.Finalizers = nil
	if err := m.client.Update(ctx, mo); err != nil {
		t.Fatal(err)
	}
	if err := m.client.Delete(ctx, mo); err != nil {
		t.Fatal(err)
	}
	m.reconcileAt(t, start.Add(2*stallEventInterval+time.Second))
	if got := stalledGauge(t, movev1alpha1.PhaseRollingBack, movev1alpha1.ReasonAccessDenied) - before; got != 0 {
		t.Errorf("a deleted MoveOperation is still counted: %v more than before", got)
	}
}

// A stall for another reason is another alert: its event is recorded at
// once, and the move is counted under its new reason only.
func TestAStallForAnotherReasonRecordsItsEventAtOnceAndMovesTheCount(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	r := &MoveOperationReconciler{Recorder: recorder}
	mo := moveIn(pathTo(movev1alpha1.PhaseDeleting)...)
	mo.Name = "stalled-twice"
	phase := movev1alpha1.PhaseDeleting
	denied, secret := stalledGauge(t, phase, movev1alpha1.ReasonAccessDenied), stalledGauge(t, phase, movev1alpha1.ReasonTargetSecretNotFound)
	start := time.Now()
	stallOnce := func(reason string, at time.Time) {
		t.Helper()
		s := newScope(mo)
		s.stalled = &stall{reason: reason, message: "a human must act"}
		setConditions(s, at)
		r.recordStall(context.Background(), s, at)
	}

	stallOnce(movev1alpha1.ReasonAccessDenied, start)
	stallOnce(movev1alpha1.ReasonTargetSecretNotFound, start.Add(time.Minute))
	if got := recorded(recorder); len(got) != 2 || !strings.HasPrefix(got[0], "Warning AccessDenied") || !strings.HasPrefix(got[1], "Warning TargetSecretNotFound") {
		t.Errorf("events %q, want one per reason, each at once", got)
	}
	if d, s := stalledGauge(t, phase, movev1alpha1.ReasonAccessDenied)-denied, stalledGauge(t, phase, movev1alpha1.ReasonTargetSecretNotFound)-secret; d != 0 || s != 1 {
		t.Errorf("counted %v under AccessDenied and %v under TargetSecretNotFound, want 0 and 1", d, s)
	}

	newScope(mo).enter(movev1alpha1.PhaseFailed)
	r.recordStall(context.Background(), newScope(mo), start.Add(2*time.Minute))
	if s := stalledGauge(t, phase, movev1alpha1.ReasonTargetSecretNotFound) - secret; s != 0 {
		t.Errorf("a move that ended is still counted as stalled: %v", s)
	}
}

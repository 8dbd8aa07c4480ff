package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Every phase but the terminal ones is an ordered list of named sub-steps
// in its row, each with a function: a new one is an entry.
func TestEveryPhaseListsItsSubStepsInItsRow(t *testing.T) {
	for _, row := range phaseOrder {
		if row.phase.IsTerminal() {
			continue
		}
		t.Run(string(row.phase), func(t *testing.T) {
			if len(row.steps) == 0 {
				t.Fatal("the row lists no sub-steps")
			}
			seen := map[string]bool{}
			for i, st := range row.steps {
				switch {
				case st.name == "":
					t.Errorf("sub-step %d has no name", i+1)
				case seen[st.name]:
					t.Errorf("two sub-steps are named %q: their progress would be one", st.name)
				case st.do == nil:
					t.Errorf("sub-step %q does nothing", st.name)
				case st.once && st.finished != nil:
					t.Errorf("sub-step %q says its progress two ways", st.name)
				}
				seen[st.name] = true
			}
		})
	}
}

// subStepLog records which sub-steps ran, and lets a test say how each
// ends.
type subStepLog struct {
	ran  []string
	ends map[string]outcome
	errs map[string]error
}

func (l *subStepLog) step(name string) stepFunc {
	return func(*MoveOperationReconciler, context.Context, *scope) (outcome, error) {
		l.ran = append(l.ran, name)
		if err := l.errs[name]; err != nil {
			return outcome{}, err
		}
		if o, ok := l.ends[name]; ok {
			return o, nil
		}
		return done(), nil
	}
}

// run reconciles the list once and returns the sub-steps that ran.
func (l *subStepLog) run(t *testing.T, r *MoveOperationReconciler, steps []subStep) ([]string, outcome, error) {
	t.Helper()
	l.ran = nil
	s := newScope(moveIn(pathTo(movev1alpha1.PhaseCopying)...))
	s.mo.UID = types.UID("substeps")
	o, err := r.runSubSteps(context.Background(), s, movev1alpha1.PhaseCopying, steps)
	return l.ran, o, err
}

func TestSubStepsResumeFromTheFirstUnfinishedAndAFreshRunRedoesThoseDoneOnce(t *testing.T) {
	l := &subStepLog{ends: map[string]outcome{}, errs: map[string]error{}}
	groupsLeft := 2
	steps := []subStep{
		{name: "once", once: true, do: l.step("once")},
		{name: "every reconcile", do: l.step("every reconcile")},
		{name: "recomputed", finished: func(*memo) bool { return groupsLeft == 0 }, do: func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error) {
			groupsLeft--
			return l.step("recomputed")(r, ctx, s)
		}},
		{name: "waits", once: true, do: l.step("waits")},
	}
	l.ends["recomputed"] = progressed()
	l.ends["waits"] = waitFor(0, "not yet")
	r := &MoveOperationReconciler{}

	for i, want := range [][]string{
		{"once", "every reconcile", "recomputed"},
		{"every reconcile", "recomputed"},
		{"every reconcile", "waits"},
	} {
		got, _, err := l.run(t, r, steps)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("reconcile %d ran %v (%v), want %v", i+1, got, err, want)
		}
	}
	delete(l.ends, "waits")
	if got, o, err := l.run(t, r, steps); err != nil || !o.isDone() || !slices.Equal(got, []string{"every reconcile", "waits"}) {
		t.Fatalf("once the wait is over: ran %v, %+v, %v; want the last two, done", got, o, err)
	}
	if got, o, _ := l.run(t, r, steps); !o.isDone() || !slices.Equal(got, []string{"every reconcile"}) {
		t.Fatalf("once all finished: ran %v, %+v; want only the one looked at on every reconcile", got, o)
	}

	// A restarted operator remembers nothing: the sub-steps done once are
	// done again (each is idempotent), the recomputed one is not.
	got, _, _ := l.run(t, &MoveOperationReconciler{}, steps)
	if want := []string{"once", "every reconcile", "waits"}; !slices.Equal(got, want) {
		t.Fatalf("a fresh run ran %v, want %v", got, want)
	}
}

func TestASubStepThatDidNotFinishStopsTheListButForThoseThatRunRegardless(t *testing.T) {
	broken := errors.New("broken")
	for _, tc := range []struct {
		name     string
		ends     map[string]outcome
		errs     map[string]error
		want     []string
		wantKind outcomeKind
		wantErr  []string
	}{
		{name: "all finish: the fallback does not run", want: []string{"first", "meanwhile", "after"}, wantKind: outcomeDone},
		{name: "the first waits: the one that must not wait for it and the fallback run",
			ends: map[string]outcome{"first": waitFor(0, "")}, want: []string{"first", "meanwhile", "fallback"}, wantKind: outcomeWait},
		{name: "the first fails with an error: only the fallback runs, its error joined",
			errs: map[string]error{"first": broken, "fallback": errors.New("fallback broken too")},
			want: []string{"first", "fallback"}, wantErr: []string{"broken", "fallback broken too"}},
		{name: "the one run while the first waits fails with an error: its error is the reconcile's",
			ends: map[string]outcome{"first": waitFor(0, "")}, errs: map[string]error{"meanwhile": broken},
			want: []string{"first", "meanwhile", "fallback"}, wantKind: outcomeWait, wantErr: []string{"broken"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &subStepLog{ends: tc.ends, errs: tc.errs}
			steps := []subStep{
				{name: "first", do: l.step("first")},
				{name: "meanwhile", runs: unlessError, do: l.step("meanwhile")},
				{name: "after", do: l.step("after")},
				{name: "fallback", runs: ifUnfinished, do: l.step("fallback")},
			}
			got, o, err := l.run(t, &MoveOperationReconciler{}, steps)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ran %v, want %v", got, tc.want)
			}
			if o.kind != tc.wantKind {
				t.Errorf("outcome %s, want %s", kindNames[o.kind], kindNames[tc.wantKind])
			}
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("error %v, want one saying %v", err, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A milestone a sub-step passes (the target's controllers scaled up while
// it waits for them) is recorded by the driver, whatever the outcome, so
// that a sub-step after it in the same reconcile sees it; one the sub-step
// passed before an error is not: the step's retry passes it again.
func TestTheDriverRecordsTheMilestonesASubStepPassed(t *testing.T) {
	l := &subStepLog{ends: map[string]outcome{}, errs: map[string]error{}}
	const milestone = "half-way"
	var seenBySecond bool
	steps := []subStep{
		{name: "first", do: l.step("first")},
		{name: "second", runs: unlessError, do: func(r *MoveOperationReconciler, _ context.Context, s *scope) (outcome, error) {
			seenBySecond = r.memoOf(s.mo.UID).hasFinished(movev1alpha1.PhaseCopying, milestone)
			return done(), nil
		}},
	}
	l.ends["first"] = waitFor(0, "not yet").reaching(milestone)
	r := &MoveOperationReconciler{}
	if _, o, err := l.run(t, r, steps); err != nil || o.kind != outcomeWait {
		t.Fatalf("got %+v, %v; want the first sub-step's wait", o, err)
	}
	if !seenBySecond {
		t.Error("the sub-step after the milestone, in the same reconcile, did not see it recorded")
	}

	other := &MoveOperationReconciler{}
	steps[0].do = func(*MoveOperationReconciler, context.Context, *scope) (outcome, error) {
		return waitFor(0, "not yet").reaching(milestone), errors.New("the write after the milestone failed")
	}
	if _, _, err := l.run(t, other, steps); err == nil {
		t.Fatal("the error was lost")
	}
	if other.memoOf(types.UID("substeps")).hasFinished(movev1alpha1.PhaseCopying, milestone) {
		t.Error("a milestone reported with an error was recorded")
	}
}

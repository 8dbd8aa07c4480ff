package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// at is a moment of a move, s seconds after it began.
func at(s float64) time.Time {
	return time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

// observation is what a watch showed of one cluster at a moment.
type observation struct {
	s                      float64
	anyStopped, allRunning bool
}

func TestTheWindowRunsFromTheFirstStopToTheLastRestart(t *testing.T) {
	cases := []struct {
		name     string
		seen     []observation
		want     time.Duration
		stopped  bool
		open     bool
		wantFrom float64
	}{
		{"nothing stopped", []observation{{0, false, true}, {5, false, true}}, 0, false, false, 0},
		{"stopped at 2 s, scaled up at 30 s, Available at 34 s",
			[]observation{{0, false, true}, {2, true, false}, {3, true, false}, {30, false, false}, {34, false, true}, {40, false, true}},
			32 * time.Second, true, false, 2},
		{"stopped again after a restart: to the last restart",
			[]observation{{1, true, false}, {10, false, true}, {20, true, false}, {25, false, true}},
			24 * time.Second, true, false, 1},
		{"never seen running again", []observation{{1, true, false}, {10, false, false}}, 0, true, true, 1},
		{"Clusters created paused in the target, then unpaused",
			[]observation{{0, false, true}, {12, true, false}, {50, false, true}}, 38 * time.Second, true, false, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock downClock
			for _, o := range c.seen {
				clock.observe(at(o.s), o.anyStopped, o.allRunning)
			}
			w := clock.window
			if w.stopped() != c.stopped || w.open() != c.open || w.duration() != c.want {
				t.Fatalf("stopped %v, open %v, %s; want stopped %v, open %v, %s", w.stopped(), w.open(), w.duration(), c.stopped, c.open, c.want)
			}
			if c.stopped && !w.from.Equal(at(c.wantFrom)) {
				t.Errorf("from %s, want %s", w.from, at(c.wantFrom))
			}
		})
	}
}

func TestEitherClusterRunsFromTheFirstStopInEitherToTheLastRestartInEither(t *testing.T) {
	source := downWindow{from: at(2), to: at(60)}
	target := downWindow{from: at(3), to: at(45)}
	if got := eitherCluster(map[string]downWindow{"source": source, "target": target}).duration(); got != 58*time.Second {
		t.Errorf("both stopped: %s, want 58s", got)
	}
	// clusterctl: the first Cluster paused in the source to the last
	// unpaused in the target.
	if got := eitherCluster(map[string]downWindow{"source": {from: at(1), to: at(20)}, "target": {from: at(5), to: at(31)}}).duration(); got != 30*time.Second {
		t.Errorf("clusterctl: %s, want 30s", got)
	}
	if w := eitherCluster(map[string]downWindow{"source": source, "target": {from: at(3)}}); !w.open() {
		t.Errorf("one cluster not back leaves the whole window open: %+v", w)
	}
	if w := eitherCluster(map[string]downWindow{"source": {}, "target": {}}); w.stopped() {
		t.Errorf("nothing stopped, yet a window: %+v", w)
	}
	want := "source 58.0s, target open, either cluster open"
	if got := describeDown(map[string]downWindow{"source": source, "target": {from: at(3)}}); got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// deployment is a provider Deployment at replicas, available or not as
// its controller reports it.
func deployment(replicas int32, available bool) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-controller-manager", Namespace: "capi-system", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2},
	}
	if available {
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = replicas, replicas, replicas, replicas
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}
	}
	return d
}

func TestProvidersRunWhenEveryDeploymentIsScaledUpAndAvailable(t *testing.T) {
	cases := []struct {
		name                   string
		ds                     []*appsv1.Deployment
		anyStopped, allRunning bool
	}{
		{"all Available", []*appsv1.Deployment{deployment(1, true), deployment(1, true)}, false, true},
		{"one scaled to zero", []*appsv1.Deployment{deployment(1, true), deployment(0, true)}, true, false},
		{"scaled up, not Available yet", []*appsv1.Deployment{deployment(1, true), deployment(1, false)}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if anyStopped, allRunning := deploymentsState(c.ds); anyStopped != c.anyStopped || allRunning != c.allRunning {
				t.Errorf("stopped %v, running %v; want %v, %v", anyStopped, allRunning, c.anyStopped, c.allRunning)
			}
		})
	}
}

func TestClusterctlStopsAClusterByPausingIt(t *testing.T) {
	cluster := func(paused bool) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"paused": paused}}}
	}
	if stopped, running := clustersState([]*unstructured.Unstructured{cluster(false), cluster(true)}); !stopped || running {
		t.Errorf("one paused: stopped %v, running %v", stopped, running)
	}
	if stopped, running := clustersState([]*unstructured.Unstructured{cluster(false)}); stopped || !running {
		t.Errorf("none paused: stopped %v, running %v", stopped, running)
	}
	// The source's paused Clusters are deleted: none left is none paused.
	if stopped, running := clustersState(nil); stopped || !running {
		t.Errorf("none left: stopped %v, running %v", stopped, running)
	}
}

func TestTheReportGivesEachMoversWindowPerCluster(t *testing.T) {
	withDown := func(tool string, rep int, source, target downWindow) *result {
		r := operatorMove(tool, rep, 100*time.Second, 40*time.Second, 4000, 1000)
		r.down = map[string]downWindow{"source": source, "target": target}
		return r
	}
	r := newReport(options{sizes: []int{10}}, machineInfo{}, []*result{
		withDown(toolOperator, 1, downWindow{from: at(5), to: at(85)}, downWindow{from: at(5), to: at(70)}),
		withDown(toolOperator, 2, downWindow{from: at(5), to: at(95)}, downWindow{from: at(6)}),
		withDown(toolClusterctl, 1, downWindow{from: at(1), to: at(20)}, downWindow{from: at(5), to: at(31)}),
		{tool: toolBaseline, n: 10, rep: 1, objects: 400, whole: 10 * time.Second},
	}, nil, time.Minute)
	got := r.controllersDown().rows
	want := [][]string{
		{"10", toolClusterctl, "19.0", "26.0", "30.0", "100.0", "0.30"},
		{"10", toolOperator, "85.0", "65.0 (1 open)", "80.0 (1 open)", "100.0", "0.80"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("row %d, %s: %q, want %q", i, r.controllersDown().header[j], got[i][j], want[i][j])
			}
		}
	}
}

//go:build cluster

package recovery_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
)

// Two replicas of the operator, as the installer's Deployment may run them,
// elect a leader; the leader is killed (SIGKILL: no release of its lease, no
// last write) in the middle of a move, and the other one takes over once the
// lease runs out and finishes the move as an uninterrupted one would.
func TestTheOtherReplicaFinishesAMoveWhenTheLeaderIsKilled(t *testing.T) {
	manager := buildManager(t)
	for _, phase := range []movev1alpha1.MovePhase{movev1alpha1.PhaseCopying, movev1alpha1.PhaseDeleting} {
		t.Run("killed in "+string(phase), func(t *testing.T) {
			rc := movetest.NewRollbackCase(t, "ha"+strings.ToLower(string(phase[:3])))
			ctx := context.Background()
			g := NewWithT(t)
			replicas := []*replica{startReplica(t, manager, "a"), startReplica(t, manager, "b")}
			leader := waitForLeader(t, replicas)

			mo := movetest.NewMoveOperation(t, rc.Ops, "ha", movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: rc.Fleet.Namespaces})
			killedIn := waitForPhaseThen(t, mo, phase, func() {
				// Cut its connection first, so that it writes nothing more
				// between the decision and its death.
				leader.proxy.Cut()
				_ = leader.run.Kill()
			})
			t.Logf("leader %s killed in %s; %s takes over", leader.name, killedIn, leader.other(replicas).name)
			done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)

			after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
			if diff := snapshot.Diff(rc.Before, after); diff != "" {
				t.Fatalf("the target differs from the source before the move:\n%s", diff)
			}
			g.Expect(movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Source, rc.Fleet.Namespaces), rc.Fleet.Namespaces...).Objects).To(BeEmpty())
			g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore), "controllers and webhooks as before")
			movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)
			g.Expect(done.Status.Progress.Copied).To(Equal(done.Status.Progress.Total))
			g.Expect(acquiredLease(leader.other(replicas).log())).To(BeTrue(), "the other replica leads now")
		})
	}
}

// buildManager returns the manager binary out of the image (test/installed).
func buildManager(t *testing.T) string {
	t.Helper()
	path, err := installed.ManagerBinary()
	if err != nil {
		t.Fatalf("getting the manager binary: %v", err)
	}
	return path
}

// replica is the operator run as installed, as a process, talking to the
// source through a proxy of its own (so one replica can be cut off alone).
type replica struct {
	name  string
	run   *installed.Running
	proxy *movetest.TCPProxy
}

func startReplica(t *testing.T, manager, name string) *replica {
	t.Helper()
	proxy := movetest.StartProxy(t, movetest.Env.Source.Config.Host)
	raw, err := os.ReadFile(movetest.OperatorKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	id := *movetest.OperatorIdentity
	id.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(id.Kubeconfig, []byte(strings.Replace(string(raw), proxy.Upstream, proxy.Addr, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, proxy: proxy}
	r.run, err = movetest.Install.Start(context.Background(), installed.Process{
		Binary: manager, Identity: &id,
		// Short leases, so that the test's takeover takes seconds.
		Args: []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
	}, filepath.Join(dir, "manager.log"))
	if err != nil {
		t.Fatalf("starting replica %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = r.run.Kill()
		if t.Failed() {
			t.Logf("replica %s log:\n%s", name, r.log())
		}
	})
	return r
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.run.LogPath)
	return string(b)
}

func (r *replica) other(all []*replica) *replica {
	for _, o := range all {
		if o != r {
			return o
		}
	}
	return nil
}

// acquiredLease reports whether a replica's log says it became leader.
func acquiredLease(log string) bool {
	return strings.Contains(strings.ToLower(log), "successfully acquired lease")
}

// waitForLeader returns the replica that acquired the leader election lease.
func waitForLeader(t *testing.T, replicas []*replica) *replica {
	t.Helper()
	var leader *replica
	NewWithT(t).Eventually(func() bool {
		for _, r := range replicas {
			if acquiredLease(r.log()) {
				leader = r
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "one replica must become leader")
	return leader
}

// waitForPhaseThen calls act as soon as the MoveOperation is seen in phase,
// and returns the phase it was in.
func waitForPhaseThen(t *testing.T, mo *movev1alpha1.MoveOperation, phase movev1alpha1.MovePhase, act func()) movev1alpha1.MovePhase {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		got := movetest.Get(NewWithT(t), mo)
		if got.Status.Phase == phase {
			act()
			return phase
		}
		if got.Status.Phase.IsTerminal() {
			t.Fatalf("the move ended in %s (%s: %s) before reaching %s", got.Status.Phase, got.Status.FailureReason, got.Status.FailureMessage, phase)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the move did not reach %s", phase)
	return ""
}

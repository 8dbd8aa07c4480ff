package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/look"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// Managers of the providers (see package quiesce) are stopped before the
// providers and restarted after them.

// selectControllers returns the Deployments this move stops in one cluster:
// the provider controllers spec.controllers.selector matches, and the
// managers (cluster-api-operator, found by itself, and those named in
// spec.controllers.additional for this cluster), flagged as such. A
// Deployment that is both is a manager. The operator's own Deployment is
// never among them. A named Deployment that does not exist is left out
// here: Validating refuses the move for it.
func (r *MoveOperationReconciler) selectControllers(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole) ([]quiesce.Controller, error) {
	selector, err := controllerSelectorOf(s.mo)
	if err != nil {
		return nil, err
	}
	keys, err := r.managersSeen(ctx, s, c, role)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", role, err)
	}
	controllers, err := quiesce.SelectWithManagers(ctx, c, selector, r.excluded(role), keys)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", role, err)
	}
	return controllers, nil
}

// oneLook returns c for one look at the Deployments of the controllers
// this move stops in a cluster: their reads are answered by one LIST of
// those spec.controllers.selector matches (look.New),
// not by a GET each. Make one per look: it never lists again.
func oneLook(s *scope, c client.Client) (client.Client, error) {
	selector, err := controllerSelectorOf(s.mo)
	if err != nil {
		return nil, err
	}
	return look.New(c, selector), nil
}

// managersSeen names the managers to stop in one cluster (managersOf),
// looking for them once per run and client from Recording on: the restores
// select the controllers at every look of their waits, only to find those
// the move recorded on their Deployments but not in status (a run that
// stopped between the two), and every such manager was found by the
// Recording that recorded it, in this run or, when this run began after
// it, by this run's first look. Validating and Recording always look
// afresh: a manager installed meanwhile must be stopped.
func (r *MoveOperationReconciler) managersSeen(ctx context.Context, s *scope, c client.Client, role movev1alpha1.ClusterRole) ([]types.NamespacedName, error) {
	switch phaseOf(s.mo) {
	case movev1alpha1.PhasePending, movev1alpha1.PhaseValidating:
		return r.managersOf(ctx, s.mo, c, role)
	}
	mem := r.memoOf(s.mo.UID)
	reuse := phaseOf(s.mo) != movev1alpha1.PhaseRecording
	if keys, ok := mem.perClient.managersOf(c); ok && reuse {
		return keys, nil
	}
	keys, err := r.managersOf(ctx, s.mo, c, role)
	if err != nil {
		return nil, err
	}
	mem.perClient.keepManagers(c, keys)
	return keys, nil
}

// managersOf names the managers to stop in one cluster: cluster-api-operator
// and the Deployments spec.controllers.additional names for this cluster,
// never the operator's own.
func (r *MoveOperationReconciler) managersOf(ctx context.Context, mo *movev1alpha1.MoveOperation, c client.Reader, role movev1alpha1.ClusterRole) ([]types.NamespacedName, error) {
	return quiesce.ManagersIn(ctx, c, mo.Spec.Controllers.AdditionalIn(role), r.excluded(role))
}

// stopControllers scales the managers to zero in both clusters and, only
// once every pod of theirs is gone, the providers. A manager's pod that is
// terminating may still be running its reconciles and start a provider
// again, so the providers wait for the pods to be gone, not for a replica
// count of zero. It returns the pods still running, per cluster and
// Deployment: the move goes on once there are none.
func (r *MoveOperationReconciler) stopControllers(ctx context.Context, s *scope, target *remote.Target) (map[string]int, error) {
	remaining := map[string]int{}
	for _, managersNow := range []bool{true, false} {
		running := make([]map[types.NamespacedName]int, 2)
		err := r.forBoth(ctx, target, func(ctx context.Context, i int, c clusterClient) error {
			look, err := oneLook(s, c.client)
			if err != nil {
				return err
			}
			pods, err := quiesce.StopStage(ctx, look, r.recordedControllers(s, c.role), managersNow)
			if err != nil {
				return fmt.Errorf("%s cluster: %w", c.role, err)
			}
			running[i] = pods
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, c := range r.clusters(target) {
			for k, n := range running[i] {
				remaining[fmt.Sprintf("%s %s", c.role, k)] = n
			}
		}
		if len(remaining) > 0 {
			return remaining, nil
		}
	}
	return remaining, nil
}

// checkStillStopped fails the move, before its point of no return, when a
// controller it stopped runs again: something the move does not stop (a
// manager it was not told of) scaled it back up. Deleting the source's
// objects with their provider running there would let it delete their
// infrastructure as well.
func (r *MoveOperationReconciler) checkStillStopped(ctx context.Context, s *scope) (outcome, error) {
	perCluster := make([]string, 2)
	err := r.forBoth(ctx, s.target, func(ctx context.Context, i int, c clusterClient) error {
		look, err := oneLook(s, c.client)
		if err != nil {
			return err
		}
		found, err := quiesce.Restarted(ctx, look, r.recordedControllers(s, c.role))
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		if len(found) > 0 {
			perCluster[i] = fmt.Sprintf("in the %s cluster %s", strings.ToLower(string(c.role)), formatReasons(found))
		}
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	restarted := slices.DeleteFunc(perCluster, func(found string) bool { return found == "" })
	if len(restarted) == 0 {
		return done(), nil
	}
	return failWith(movev1alpha1.ReasonControllerRestarted, fmt.Sprintf(
		"controllers the move stopped run again, %s: something the move does not stop scaled them up (a manager of the providers: name its Deployment in spec.controllers.additional); the move is rolled back before anything is deleted",
		strings.Join(restarted, "; "))), nil
}

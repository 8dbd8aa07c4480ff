package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
)

var recordingPhase = phaseSpec{
	phase:     movev1alpha1.PhaseRecording,
	condition: movev1alpha1.ControllersRecordedCondition,
	preamble:  targetOnly,
	steps:     recordingSteps,
	// Nothing is stopped yet, but the move holds the source's claim and
	// may have suspended GitOps managers, and a target that went away
	// would otherwise keep it here for ever.
	errorBound: &errorBound{
		timeouts: "spec.timeouts.scaleDown", reason: movev1alpha1.ReasonRecordingTimeout, stuck: "still failed after",
		bound: func(spec movev1alpha1.MoveOperationSpec) time.Duration { return spec.Timeouts.ScaleDownTimeout() },
		since: sincePhaseStarted,
	},
}

// recordingSteps save the replica count of every controller in both
// clusters, on the Deployments (never overwriting) and in status. Each
// looks at the clusters on every reconcile, and finds its work done after
// a restart.
var recordingSteps = []subStep{
	// From the first write on, the move needs the target until it has
	// settled, also to roll back: the Secret must outlive a deletion of its
	// namespace (which also deletes the MoveOperation) until then.
	{name: "hold the Secret", do: func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error) {
		return done(), r.holdSecret(ctx, s.mo)
	}},
	// GitOps managers stop before anything else changes in the source
	// (spec.gitOps: Suspend): see gitops.go.
	{name: "suspend GitOps", do: func(r *MoveOperationReconciler, ctx context.Context, s *scope) (outcome, error) {
		return done(), r.suspendGitOps(ctx, s)
	}},
	{name: "record the controllers", do: (*MoveOperationReconciler).recordControllers},
}

// recordControllers records the replicas of the controllers the move
// stops, in both clusters at once.
func (r *MoveOperationReconciler) recordControllers(ctx context.Context, s *scope) (outcome, error) {
	perCluster := make([][]movev1alpha1.RecordedController, 2)
	err := r.forBoth(ctx, s.target, func(ctx context.Context, i int, c clusterClient) error {
		look, err := oneLook(s, c.client)
		if err != nil {
			return err
		}
		controllers, err := r.selectControllers(ctx, s, look, c.role)
		if err != nil {
			return err
		}
		stopped, err := quiesce.Record(ctx, look, controllers)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		for _, d := range stopped {
			perCluster[i] = append(perCluster[i], movev1alpha1.RecordedController{
				Cluster: c.role, Namespace: d.Key.Namespace, Name: d.Key.Name, OriginalReplicas: ptr.Deref(d.Recorded, d.Replicas), Manager: d.Manager,
			})
		}
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	s.mo.Status.Controllers = slices.Concat(perCluster...)
	return done(), nil
}

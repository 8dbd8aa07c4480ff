package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/remote"
)

// checkManagers finds the Deployments that manage the providers: one named
// in spec.controllers.additional that does not exist in a cluster it is
// named for is a finding (a manager the user wants stopped and the move
// cannot find would go on running); the others, and cluster-api-operator,
// are noted, so that a dry run shows what the move stops.
func checkManagers(ctx context.Context, e *Env) error {
	type cluster struct {
		role movev1alpha1.ClusterRole
		cl   client.Client
	}
	clusters := []cluster{{movev1alpha1.ClusterSource, e.Source}}
	switch {
	case e.targetReady():
		clusters = append([]cluster{{movev1alpha1.ClusterTarget, e.Target.Client}}, clusters...)
	case !e.Spec.Target.IsBackup():
		return nil // the target's own finding says why
	}
	for _, c := range clusters {
		additional := e.Spec.Controllers.AdditionalIn(c.role)
		_, missing, err := quiesce.GetControllers(ctx, c.cl, additional, true)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		if len(missing) > 0 {
			names := make([]string, 0, len(missing))
			for _, k := range missing {
				names = append(names, k.String())
			}
			e.find(movev1alpha1.ReasonControllerNotFound, fmt.Sprintf(
				"spec.controllers.additional names Deployment %s in the %s cluster, which does not exist there; correct its namespace and name, or its cluster (Source, Target or Both), in a new MoveOperation",
				strings.Join(names, ", "), strings.ToLower(string(c.role))))
			continue
		}
		operators, err := quiesce.FindCAPIOperator(ctx, c.cl)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", c.role, err)
		}
		for _, k := range operators {
			e.warn("", fmt.Sprintf(
				"%s cluster: cluster-api-operator (Deployment %s) reconciles the provider Deployments; it is stopped for the move before the providers, and restarted after them",
				c.role, k))
		}
		for _, k := range additional {
			e.warn("", fmt.Sprintf(
				"%s cluster: Deployment %s (spec.controllers.additional) is stopped for the move before the providers, and restarted after them", c.role, k))
		}
	}
	return nil
}

// checkPlan reads the objects to move and plans the move: an object whose
// owner does not move with it is a finding. Objects paused by somebody
// else are noted: they move paused and stay paused.
func checkPlan(ctx context.Context, e *Env) error {
	if e.SourceTypes == nil || !e.selectorValid {
		return nil
	}
	plan, err := planner.Source{Reader: e.Source, Types: e.SourceTypesCache}.Plan(ctx, e.Selection, e.SourceTypes)
	if err != nil {
		return err
	}
	// What follows reads the target at the versions it stores the kinds at.
	plan.SetTargetVersions(TargetVersions(e.KindVersions))
	e.Plan = plan
	if err := e.Plan.Validate(); err != nil {
		e.find(movev1alpha1.ReasonOrphanedObjects, err.Error()+"; move their owners too (widen spec.namespaces or spec.clusterSelector), or remove the objects")
	}
	if paused := e.Plan.PausedByOthers(string(e.UID)); len(paused) > 0 {
		e.warn("", fmt.Sprintf(
			"%s were paused before the move: they move paused and stay paused; unpause them in the target when you want their controllers to act", JoinRefs(paused)))
	}
	return nil
}

// checkTargetSecretStays refuses a move that would take the target's
// kubeconfig Secret with it. Moving a bootstrap cluster's state into the
// workload cluster it created invites pointing spec.target at that
// Cluster's own kubeconfig Secret, which moves with the Cluster: Deleting
// would delete it from the source (taking the move's finalizer off it with
// the others), and the move would have no way left to the target to
// restore its controllers.
func checkTargetSecretStays(_ context.Context, e *Env) error {
	if e.Plan == nil {
		return nil
	}
	ref := e.Spec.Target.KubeconfigSecretRef
	secrets := e.Plan.OfKind(graph.SecretGroupKind)
	i := slices.IndexFunc(secrets, func(o *graph.Object) bool { return o.Namespace == e.Namespace && o.Name == ref.Name })
	if i < 0 {
		return nil
	}
	key := ref.KeyOrDefault()
	e.find(movev1alpha1.ReasonTargetSecretMoves, fmt.Sprintf(
		"Secret %s/%s, which spec.target.kubeconfigSecretRef names, is one of the objects the move takes, and the move would delete it from the source while it still needs the target; "+
			"copy the kubeconfig to a Secret of its own (kubectl -n %s get secret %s -o jsonpath='{.data.%s}' | base64 -d > target.kubeconfig && kubectl -n %s create secret generic move-target --from-file=value=target.kubeconfig) and name that one in a new MoveOperation",
		e.Namespace, ref.Name, e.Namespace, ref.Name, key, e.Namespace))
	return nil
}

// checkProvisioned applies clusterctl's preflight: no Cluster or Machine
// of the plan may still be provisioning (see move.CheckProvisioned).
func checkProvisioned(ctx context.Context, e *Env) error {
	if e.Plan == nil {
		return nil
	}
	if err := move.CheckProvisioned(ctx, e.Source, e.Plan); err != nil {
		e.find(movev1alpha1.ReasonNotProvisioned, err.Error()+"; wait for the clusters to finish provisioning, then create a new MoveOperation")
	}
	return nil
}

// checkTargetObjects finds objects of the plan that the target holds
// already and the move did not create (see CheckTarget).
func checkTargetObjects(ctx context.Context, e *Env) error {
	if e.Plan == nil || !e.targetReady() {
		return nil
	}
	targetID, err := remote.ClusterID(ctx, e.Target.Client)
	if err != nil {
		return fmt.Errorf("target cluster: %w", err)
	}
	inTarget, err := CheckTarget(ctx, e.Source, e.Target.Client, targetID, e.Plan)
	if err != nil {
		return err
	}
	if len(inTarget.Conflicts) > 0 {
		e.find(movev1alpha1.ReasonTargetConflict, fmt.Sprintf(
			"%s already exist in the target and were not created by this move; delete them there or leave their clusters out of the move", JoinRefs(inTarget.Conflicts)))
	}
	return nil
}

// JoinRefs names objects for a message, the first ten of them.
func JoinRefs(refs []graph.ObjectRef) string { return graph.JoinFirstTen(refs, ", ") }

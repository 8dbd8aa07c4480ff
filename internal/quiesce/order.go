package quiesce

import (
	"context"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Managers of the providers are Deployments that reconcile the provider
// Deployments themselves (cluster-api-operator applies a provider's
// manifests again, replicas included, when it starts, resyncs or sees its
// provider object change) or the Cluster API objects (Rancher Turtles, a
// user's own). Left running, one of them starts a provider a move stopped,
// or writes objects the move is copying. They are recorded and restored
// like the providers, flagged as managers, and ordered around them:
// stopped first, their pods gone, before any provider is scaled down;
// restarted last, once the providers are Available again.

// ManagersIn names the managers to stop in one cluster: cluster-api-operator
// (found by itself) and the Deployments named for that cluster, once each,
// never one of exclude (the operator's own).
func ManagersIn(ctx context.Context, c client.Reader, named, exclude []types.NamespacedName) ([]types.NamespacedName, error) {
	keys, err := FindCAPIOperator(ctx, c)
	if err != nil {
		return nil, err
	}
	keys = append(keys, named...)
	skip := map[types.NamespacedName]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	var out []types.NamespacedName
	for _, k := range keys {
		if !skip[k] {
			skip[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

// SelectWithManagers returns the Deployments a move stops in one cluster:
// the provider controllers selector matches, but those of exclude, and the
// managers named by managers, flagged as such, sorted by key. A Deployment
// that is both is a manager. A named manager that does not exist is left
// out: the move's validation refuses it.
func SelectWithManagers(ctx context.Context, c client.Client, selector labels.Selector, exclude, managers []types.NamespacedName) ([]Controller, error) {
	providers, err := SelectControllers(ctx, c, selector, exclude...)
	if err != nil {
		return nil, err
	}
	out, _, err := GetControllers(ctx, c, managers, true)
	if err != nil {
		return nil, err
	}
	isManager := map[types.NamespacedName]bool{}
	for _, m := range out {
		isManager[m.Key] = true
	}
	for _, p := range providers {
		if !isManager[p.Key] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, nil
}

// StopStage scales one stage of a cluster's controllers to zero (its
// managers, or its providers: see SplitManagers) and returns their pods
// still running. A manager's pod that is terminating may still run its
// reconciles and start a provider again, so the providers wait for the
// managers' pods to be gone, not for a replica count of zero.
func StopStage(ctx context.Context, c client.Client, controllers []Controller, managers bool) (map[types.NamespacedName]int, error) {
	providers, managing := SplitManagers(controllers)
	stage := providers
	if managers {
		stage = managing
	}
	if err := ScaleDown(ctx, c, stage); err != nil {
		return nil, err
	}
	return RunningPods(ctx, c, stage)
}

// Restart is where one cluster's restart of its controllers stands.
type Restart struct {
	// Restored are the controllers scaled back to their recorded replicas.
	Restored []Controller
	// Unavailable are those of them not yet Available, with why.
	Unavailable map[types.NamespacedName]string
	// Gone are the controllers whose Deployment no longer exists (deleted
	// during the move): nothing is left to restore, and the restore goes on
	// without them rather than fail on them for ever.
	Gone []types.NamespacedName
}

// RestartInOrder scales one cluster's providers back to their recorded
// replicas (fallback when none is recorded) and, once they are all
// Available, their managers: a manager back first would find the providers
// still at zero.
func RestartInOrder(ctx context.Context, c client.Client, controllers []Controller, fallback int32) (Restart, error) {
	providers, managers := SplitManagers(controllers)
	var out Restart
	for _, stage := range [][]Controller{providers, managers} {
		if len(stage) == 0 {
			continue
		}
		restored, unavailable, err := RestoreAndCheck(ctx, c, stage, fallback)
		if err != nil {
			return Restart{}, err
		}
		out.Restored = append(out.Restored, restored...)
		out.Gone = append(out.Gone, missingFrom(stage, restored)...)
		if out.Unavailable = unavailable; len(unavailable) > 0 {
			return out, nil
		}
	}
	return out, nil
}

// missingFrom returns the keys of the controllers that are not among
// restored.
func missingFrom(controllers, restored []Controller) []types.NamespacedName {
	found := map[types.NamespacedName]bool{}
	for _, c := range restored {
		found[c.Key] = true
	}
	var out []types.NamespacedName
	for _, c := range controllers {
		if !found[c.Key] {
			out = append(out, c.Key)
		}
	}
	return out
}

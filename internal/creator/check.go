package creator

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
)

// Ask asks the source whether user holds every one of needs, and returns
// the refusal to show (Refusal), empty when they do. planned is set for
// the plan's needs.
func Ask(ctx context.Context, source client.Client, user access.User, needs []access.Need, planned bool) (string, error) {
	missing, err := access.CheckAs(ctx, source, user, needs, access.DefaultConcurrency)
	if err != nil {
		return "", fmt.Errorf("checking the rights of the MoveOperation's creator: %w", err)
	}
	return Refusal(user, missing, planned), nil
}

// AskPlan asks whether user may read every object the plan takes to the
// target and delete every object it deletes from the source (PlanNeeds).
// It is asked whenever a plan is built, not only in Validating: the plan
// Copying records is the source as it is then, and may hold objects the
// plan Validating showed did not.
//
// The plan's needs are asked namespace by namespace, a few reviews however
// large the plan. A right refused for a whole namespace may still be held
// object by object (a Role whose rule names the objects: a tenant granted
// exactly its identity's credentials Secret), so each refused need is asked
// again for the plan's objects it stood for, by name, up to
// maxAskedByName of them; only what is refused by name, or a need that
// stands for more objects than that, is a refusal.
func AskPlan(ctx context.Context, source client.Client, user access.User, plan *graph.Plan) (string, error) {
	needs, err := PlanNeeds(plan, plan.Types())
	if err != nil {
		return "", err
	}
	missing, err := access.CheckAs(ctx, source, user, needs, access.DefaultConcurrency)
	if err != nil || len(missing) == 0 {
		return "", wrapCheck(err)
	}
	named, tooMany, err := byName(plan, plan.Types(), missing)
	if err != nil {
		return "", err
	}
	refused, err := access.CheckAs(ctx, source, user, named, access.DefaultConcurrency)
	if err != nil {
		return "", wrapCheck(err)
	}
	return Refusal(user, append(tooMany, refused...), true), nil
}

// maxAskedByName bounds how many objects one refused namespace-wide need
// is asked again for, by name: past it the refusal stands as it is, rather
// than cost a review per object of a namespace the creator may not read.
const maxAskedByName = 50

// byName turns needs refused for a whole namespace into the same needs
// for each object of the plan they stood for, by name; those that stand
// for more than maxAskedByName objects are returned as they are.
func byName(plan *graph.Plan, types *graph.Types, refused []access.Need) (named, tooMany []access.Need, err error) {
	perNeed := map[access.Need][]access.Need{}
	for _, o := range plan.Objects() {
		t, ok := types.Lookup(o.GroupKind())
		if !ok {
			return nil, nil, fmt.Errorf("planned object %s has a kind the plan does not know", o)
		}
		verbs := []string{"get"}
		if o.Delete {
			verbs = append(verbs, "delete")
		}
		for _, verb := range verbs {
			r := right{verb: verb, group: t.GVK.Group, resource: t.Resource}
			wide := r.need(o.Namespace, "")
			perNeed[wide] = append(perNeed[wide], r.need(o.Namespace, o.Name))
		}
	}
	for _, n := range refused {
		objects := perNeed[n]
		if len(objects) == 0 || len(objects) > maxAskedByName {
			tooMany = append(tooMany, n)
			continue
		}
		named = append(named, objects...)
	}
	return named, tooMany, nil
}

func wrapCheck(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("checking the rights of the MoveOperation's creator: %w", err)
}

// AskRestore asks the cluster a restore writes into whether user may
// create every object of its plan there, kind by kind and namespace by
// namespace, and says what they may not: a restore writes every credential
// of the archive on its creator's behalf, so its creator must be someone
// who could have created them.
func AskRestore(ctx context.Context, c client.Client, user access.User, plan *graph.Plan) (string, error) {
	var needs []access.Need
	for _, o := range plan.Objects() {
		t, ok := plan.Types().Lookup(o.GroupKind())
		if !ok {
			return "", fmt.Errorf("planned object %s has a kind the plan does not know", o)
		}
		needs = append(needs, access.Need{Cluster: movev1alpha1.ClusterTarget, Verb: "create", Group: t.GVK.Group, Resource: t.Resource, Namespace: o.Namespace})
	}
	missing, err := access.CheckAs(ctx, c, user, access.Compact(needs), access.DefaultConcurrency)
	if err != nil || len(missing) == 0 {
		return "", wrapCheck(err)
	}
	n := missing[0]
	where := "at the cluster scope"
	if n.Namespace != "" {
		where = "in namespace " + n.Namespace
	}
	msg := fmt.Sprintf("the MoveOperation's creator %q may not create %s %s in this cluster, and the restore creates the archive's objects of that kind there", user.Name, groupResource(n.Group, n.Resource), where)
	if more := len(missing) - 1; more > 0 {
		msg += fmt.Sprintf(" (and %d more rights are missing)", more)
	}
	return msg + "; the restore writes nothing on their behalf: grant them that right, or have someone who holds it create the MoveOperation", nil
}

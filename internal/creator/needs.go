package creator

import (
	"fmt"
	"strings"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planner"
)

// right is one thing a move does on its creator's behalf, as a
// SubjectAccessReview asks it, and why the creator must be allowed it.
type right struct {
	verb, group, resource string
	why                   string
}

func (r right) need(namespace, name string) access.Need {
	return access.Need{Cluster: movev1alpha1.ClusterSource, Verb: r.verb, Group: r.group, Resource: r.resource, Namespace: namespace, Name: name}
}

// namespaceRight is a right asked in each namespace a MoveOperation
// names, which depends on which way the objects go: out of the cluster
// (a move, a backup) or into it (a restore). Both rights are of the same
// resource; only the verb and why differ.
type namespaceRight struct {
	move, restore right
}

// of is the right a spec needs.
func (nr namespaceRight) of(spec movev1alpha1.MoveOperationSpec) right {
	if spec.IsRestore() {
		return nr.restore
	}
	return nr.move
}

// What a MoveOperation's spec directs the operator to do in the source,
// each stood for by the rights below. The admission policy asks these of
// the requesting user; the operator asks them again, and the plan's own.
var (
	// perNamespace: each namespace of spec.namespaces (every namespace
	// when it is empty) is read, its Secrets sent to a cluster the creator
	// chooses, and its Cluster API objects deleted from the source. A
	// backup is asked the same, as a move; a restore instead writes the
	// archive's objects into those namespaces of the cluster it runs in.
	perNamespace = []namespaceRight{
		{
			move:    right{verb: "get", group: "", resource: "secrets", why: "the move sends the namespace's Secrets (kubeconfigs, CA and etcd keys, cloud credentials) to the target"},
			restore: right{verb: "create", group: "", resource: "secrets", why: "the restore writes the archive's Secrets of the namespace (kubeconfigs, CA and etcd keys, cloud credentials) there"},
		},
		{
			move:    right{verb: "delete", group: "cluster.x-k8s.io", resource: "clusters", why: "the move takes the namespace's Clusters away from the source"},
			restore: right{verb: "create", group: "cluster.x-k8s.io", resource: "clusters", why: "the restore creates the archive's Clusters of the namespace there"},
		},
	}
	// targetSecret: the operator reads the Secrets the MoveOperation
	// names, in its namespace: the target's kubeconfig, or a backup's
	// public keys and registry credentials.
	targetSecret = right{verb: "get", group: "", resource: "secrets", why: "the operator reads the target's kubeconfig (or an archive's keys or registry credentials) from it"}
	// scaleController: each Deployment of spec.controllers.additional the
	// move stops in the source is scaled with a patch.
	scaleController = right{verb: "patch", group: "apps", resource: "deployments", why: "spec.controllers.additional has the move scale it to zero"}
	// chooseControllers: a spec.controllers.selector other than the
	// default (the providers, which every move stops) has the move scale
	// whatever Deployments it matches, in both clusters.
	chooseControllers = right{verb: "patch", group: "apps", resource: "deployments", why: "spec.controllers.selector chooses which Deployments the move scales to zero, anywhere"}
	// suspendGitOps: with spec.gitOps Suspend, the GitOps managers of the
	// moved objects are patched wherever they are.
	suspendGitOps = []right{
		{verb: "patch", group: "kustomize.toolkit.fluxcd.io", resource: "kustomizations", why: "spec.gitOps Suspend has the move suspend the Flux Kustomizations that manage moved objects"},
		{verb: "patch", group: "helm.toolkit.fluxcd.io", resource: "helmreleases", why: "spec.gitOps Suspend has the move suspend the Flux HelmReleases that manage moved objects"},
		{verb: "patch", group: "argoproj.io", resource: "applications", why: "spec.gitOps Suspend has the move stop the automated sync of the Argo CD Applications that manage moved objects"},
	}
)

// SpecNeeds are the rights a MoveOperation's spec needs of its creator in
// the source: the questions of the admission policy, without its limits on
// how many namespaces and controllers it asks about one by one.
func SpecNeeds(spec movev1alpha1.MoveOperationSpec, namespace string) []access.Need {
	var out []access.Need
	namespaces := planner.NamespacesOf(spec)
	if len(namespaces) == 0 {
		namespaces = []string{""} // every namespace
	}
	for _, ns := range namespaces {
		for _, r := range perNamespace {
			out = append(out, r.of(spec).need(ns, ""))
		}
	}
	if src := spec.Source; src != nil {
		if src.Archive.IdentitySecretRef != nil {
			out = append(out, targetSecret.need(namespace, src.Archive.IdentitySecretRef.Name))
		}
		if src.Archive.OCI != nil && src.Archive.OCI.CredentialsSecretRef != nil {
			out = append(out, targetSecret.need(namespace, src.Archive.OCI.CredentialsSecretRef.Name))
		}
	} else if a := spec.Target.Archive; a != nil {
		if a.RecipientsSecretRef != nil {
			out = append(out, targetSecret.need(namespace, a.RecipientsSecretRef.Name))
		}
		if a.OCI != nil && a.OCI.CredentialsSecretRef != nil {
			out = append(out, targetSecret.need(namespace, a.OCI.CredentialsSecretRef.Name))
		}
	} else {
		out = append(out, targetSecret.need(namespace, spec.Target.KubeconfigSecretRef.Name))
	}
	for _, c := range spec.Controllers.Additional {
		if c.Cluster.In(movev1alpha1.ClusterSource) {
			out = append(out, scaleController.need(c.Namespace, c.Name))
		}
	}
	if !spec.Controllers.SelectsProviders() {
		out = append(out, chooseControllers.need("", ""))
	}
	if spec.GitOps == movev1alpha1.GitOpsSuspend {
		for _, r := range suspendGitOps {
			out = append(out, r.need("", ""))
		}
	}
	if spec.IsRestore() {
		// A restore runs in the cluster it writes into: the move's target.
		for i := range out {
			out[i].Cluster = movev1alpha1.ClusterTarget
		}
	}
	return out
}

// PlanNeeds are the rights the plan (of the source's types) needs of the creator in the source:
// reading every object that moves (it leaves for the target), and
// deleting every object the move deletes from the source. The plan
// reaches beyond spec.namespaces (a cluster-scoped identity's credentials
// Secret, a ClusterClass of another namespace): the creator must be
// allowed there too.
func PlanNeeds(plan *graph.Plan, types *graph.Types) ([]access.Need, error) {
	var out []access.Need
	for _, o := range plan.Objects() {
		t, ok := types.Lookup(o.GroupKind())
		if !ok {
			return nil, fmt.Errorf("planned object %s has a kind the plan does not know", o)
		}
		get := right{verb: "get", group: t.GVK.Group, resource: t.Resource}
		out = append(out, get.need(o.Namespace, ""))
		if o.Delete {
			del := right{verb: "delete", group: t.GVK.Group, resource: t.Resource}
			out = append(out, del.need(o.Namespace, ""))
		}
	}
	return access.Compact(out), nil
}

// Refusal says what the creator may not do and what it is for: the first
// of missing, in the order of access.Compact, and how many more there are.
// planned is set for the plan's needs (PlanNeeds), whose objects the spec
// may not name.
func Refusal(user access.User, missing []access.Need, planned bool) string {
	if len(missing) == 0 {
		return ""
	}
	n := missing[0]
	where := "at the cluster scope (every namespace)"
	if n.Namespace != "" {
		where = "in namespace " + n.Namespace
	}
	what := groupResource(n.Group, n.Resource)
	if n.Name != "" {
		what += " " + n.Name
	}
	cluster := "the source"
	if n.Cluster == movev1alpha1.ClusterTarget {
		cluster = "this cluster, which the restore writes into"
	}
	msg := fmt.Sprintf("the MoveOperation's creator %q may not %s %s %s in %s", user.Name, n.Verb, what, where, cluster)
	why := whyOf(n)
	if planned {
		why = plannedWhy(n)
	}
	if why != "" {
		msg += ", and " + why
	}
	if more := len(missing) - 1; more > 0 {
		msg += fmt.Sprintf(" (and %d more rights are missing)", more)
	}
	return msg + "; the move reads and writes nothing on their behalf: grant them that right, or have someone who holds it create the MoveOperation"
}

// whyOf says what a move does with a right, when it is one of the spec's.
func whyOf(n access.Need) string {
	all := append(append([]right{}, targetSecret, scaleController, chooseControllers), suspendGitOps...)
	for _, nr := range perNamespace {
		all = append(all, nr.move, nr.restore)
	}
	for _, r := range all {
		if r.verb == n.Verb && r.group == n.Group && r.resource == n.Resource {
			if r == targetSecret && n.Name == "" {
				continue
			}
			return r.why
		}
	}
	return ""
}

// plannedWhy says why the plan needs a right: the graph reached an object
// there (an owner, a credential of a moved identity), wherever the spec
// pointed.
func plannedWhy(n access.Need) string {
	if n.Verb == "delete" {
		return "the move would delete objects of that kind there from the source"
	}
	return "the move would send objects of that kind from there to the target (the plan reaches them from what the spec names: owners, credentials of a moved identity)"
}

func groupResource(group, resource string) string {
	if group == "" {
		return resource
	}
	return strings.Join([]string{resource, group}, ".")
}

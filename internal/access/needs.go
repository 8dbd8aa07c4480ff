package access

import (
	"cmp"
	"slices"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

// Need is one request the move makes in one cluster: a verb on a resource,
// cluster-wide or in one namespace.
type Need struct {
	Cluster movev1alpha1.ClusterRole
	Verb    string
	// Group is the API group ("" for the core group).
	Group string
	// Resource is the plural resource, with "/<subresource>" when the
	// request is on a subresource ("clusters/status").
	Resource string
	// Namespace is where the request is made; "" is cluster-wide (every
	// namespace, or a cluster-scoped resource).
	Namespace string
	// Name, when set, is the one object the request is about (the target's
	// kubeconfig Secret); "" is every object.
	Name string
}

func compareNeeds(a, b Need) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(verbRank(a.Verb), verbRank(b.Verb)), cmp.Compare(a.Verb, b.Verb))
}

// verbOrder is the order in which verbs are named: reads first, as
// kubebuilder and the Kubernetes docs write them.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

func verbRank(v string) int {
	if i := slices.Index(verbOrder, v); i >= 0 {
		return i
	}
	return len(verbOrder)
}

// Kind is a kind that moves, as far as access is concerned.
type Kind struct {
	Group, Resource string
	Namespaced      bool
}

// KindsOf returns the kinds of a graph.Types (nil: none).
func KindsOf(ts *graph.Types) []Kind {
	if ts == nil {
		return nil
	}
	var out []Kind
	for _, t := range ts.All() {
		out = append(out, Kind{Group: t.GVK.Group, Resource: t.Resource, Namespaced: t.Namespaced})
	}
	return out
}

// Move is what decides what a move needs.
type Move struct {
	// SourceKinds are the kinds that move, as the source has them
	// (preflight's kinds check, graph.DiscoverTypes).
	SourceKinds []Kind
	// TargetKinds are the target's kinds of the same labels; the target is
	// written only the source's kinds, but a rollback lists all of its own
	// in the namespaces it created.
	TargetKinds []Kind
	// GitOps is spec.gitOps.
	GitOps movev1alpha1.GitOpsPolicy
	// Namespace is the MoveOperation's: its plan record, the target's
	// kubeconfig Secret and its events are there.
	Namespace string
	// ClaimNamespace is where the claim's Lease is (the operator's own
	// namespace).
	ClaimNamespace string
}

// Verbs of a move on the objects it moves, found by reading what the code
// calls (internal/move, internal/graph, internal/preflight). A verb in
// these lists that the code does not use makes users grant too much; one
// the code uses and the lists lack is a move that fails half-way.
var (
	// In the source the moved objects are listed (graph.Discover, the
	// copy's pages, block-move, GitOps detection), read one by one,
	// patched (pause, provenance, the delete-for-move annotation and the
	// finalizers, each also rehearsed as a dry run) and deleted. Nothing
	// is created or updated there.
	sourceObjectVerbs = []string{"get", "list", "patch", "delete"}
	// Cluster-scoped objects are copied, never deleted from the source.
	sourceGlobalVerbs = []string{"get", "list", "patch"}
	// In the target the copies are created, read back, patched (owner
	// references, managed fields, unpause, the rollback's delete-for-move),
	// updated as a dry run (ValidateInTarget asks the target's webhooks),
	// listed (what the target holds already) and deleted on a rollback.
	targetObjectVerbs = []string{"get", "list", "create", "update", "patch", "delete"}
	// A kind only the target has is only listed: a rollback makes sure a
	// namespace it created holds nothing else before deleting it.
	targetOnlyVerbs = []string{"list"}
)

// Fixed needs: what a move touches whatever moves. Namespaced ones whose
// namespace is known are marked with a placeholder that Needs replaces.
const (
	inMoveNamespace  = "\x00move"
	inClaimNamespace = "\x00claim"
)

type fixed struct {
	group     string
	resources []string
	verbs     []string
	namespace string
}

// bothFixed are needed in the source and the target alike.
var bothFixed = []fixed{
	// The kube-system namespace's UID tells the clusters apart.
	{group: "", resources: []string{"namespaces"}, verbs: []string{"get"}},
	// The kinds to move: CRDs labelled for clusterctl.
	{group: "apiextensions.k8s.io", resources: []string{"customresourcedefinitions"}, verbs: []string{"list"}},
	// Provider controllers are found, scaled by patch and watched go.
	{group: "apps", resources: []string{"deployments"}, verbs: []string{"get", "list", "patch"}},
	{group: "", resources: []string{"pods"}, verbs: []string{"list"}},
	// A webhook's Service names the Deployment that serves it.
	{group: "", resources: []string{"services"}, verbs: []string{"get"}},
	// The bypass is written on the webhook configurations.
	{group: "admissionregistration.k8s.io", resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, verbs: []string{"get", "list", "update"}},
	// The providers installed (clusterctl's inventory, or
	// cluster-api-operator's objects).
	{group: "clusterctl.cluster.x-k8s.io", resources: []string{"providers"}, verbs: []string{"list"}},
	{group: "operator.cluster.x-k8s.io", resources: []string{"addonproviders", "bootstrapproviders", "controlplaneproviders",
		"coreproviders", "infrastructureproviders", "ipamproviders", "runtimeextensionproviders"}, verbs: []string{"list"}},
	// The bypass is scoped to the operator's username, learnt here.
	{group: "authentication.k8s.io", resources: []string{"selfsubjectreviews"}, verbs: []string{"create"}},
}

// sourceFixed are needed in the source only.
var sourceFixed = []fixed{
	// The plan record and the record of copies: ConfigMaps beside the
	// MoveOperation (internal/planrecord), written once, never updated.
	{group: "", resources: []string{"configmaps"}, verbs: []string{"list", "create", "delete"}, namespace: inMoveNamespace},
	// The target's kubeconfig Secret holds a finalizer while the move runs.
	{group: "", resources: []string{"secrets"}, verbs: []string{"get", "patch"}, namespace: inMoveNamespace},
	// One move at a time: the claim's Lease (internal/claim).
	{group: "coordination.k8s.io", resources: []string{"leases"}, verbs: []string{"get", "create", "update", "delete"}, namespace: inClaimNamespace},
	// Events of the MoveOperation (controller-runtime's events.k8s.io recorder).
	{group: "events.k8s.io", resources: []string{"events"}, verbs: []string{"create", "patch"}, namespace: inMoveNamespace},
	// A GitOps kind's CRD says at which version its objects are read.
	{group: "apiextensions.k8s.io", resources: []string{"customresourcedefinitions"}, verbs: []string{"get"}},
}

// targetFixed are needed in the target only: the namespaces of the copies
// are created there, and deleted again by a rollback when the move created
// them.
var targetFixed = []fixed{
	{group: "", resources: []string{"namespaces"}, verbs: []string{"create", "delete"}},
}

// fixedGroups are the API groups of the fixed needs (bothFixed,
// sourceFixed, targetFixed, gitOpsKinds): a move needs some of their
// resources, which the installer's roles name one by one.
var fixedGroups = func() map[string]bool {
	out := map[string]bool{}
	for _, fs := range [][]fixed{bothFixed, sourceFixed, targetFixed, gitOpsKinds} {
		for _, f := range fs {
			out[f.group] = true
		}
	}
	return out
}()

// gitOpsKinds are the GitOps managers a move reads (internal/gitops): the
// managers of moved objects are resolved whatever spec.gitOps says, and
// with Suspend they are patched (suspended, then given back their settings
// on a rollback).
var gitOpsKinds = []fixed{
	{group: "kustomize.toolkit.fluxcd.io", resources: []string{"kustomizations"}},
	{group: "helm.toolkit.fluxcd.io", resources: []string{"helmreleases"}},
	{group: "argoproj.io", resources: []string{"applications"}},
}

// Needs returns every request a move makes, per cluster, sorted, each once.
// A dry run needs the same: it reports what the move it rehearses would
// lack.
//
// Namespaced kinds are checked cluster-wide even when spec.namespaces
// limits the move: the move lists Clusters in every namespace (a
// ClusterClass may be used across namespaces) and unpauses by listing
// every namespace, and the operator's roles are ClusterRoles.
func Needs(m Move) []Need {
	var out []Need
	out = append(out, fixedNeeds(m, movev1alpha1.ClusterSource, bothFixed)...)
	out = append(out, fixedNeeds(m, movev1alpha1.ClusterTarget, bothFixed)...)
	out = append(out, fixedNeeds(m, movev1alpha1.ClusterSource, sourceFixed)...)
	out = append(out, fixedNeeds(m, movev1alpha1.ClusterTarget, targetFixed)...)
	out = append(out, gitOpsNeeds(m)...)
	out = append(out, kindNeeds(m)...)
	return Compact(out)
}

// fixedNeeds returns the requests of the fixed needs fs in one cluster,
// with their namespace placeholders replaced by m's namespaces.
func fixedNeeds(m Move, cluster movev1alpha1.ClusterRole, fs []fixed) []Need {
	var out []Need
	for _, f := range fs {
		ns := f.namespace
		switch ns {
		case inMoveNamespace:
			ns = m.Namespace
		case inClaimNamespace:
			ns = m.ClaimNamespace
		}
		for _, r := range f.resources {
			for _, v := range f.verbs {
				out = append(out, Need{Cluster: cluster, Verb: v, Group: f.group, Resource: r, Namespace: ns})
			}
		}
	}
	return out
}

// gitOpsNeeds returns the source's requests on the GitOps managers: they
// are always read, and patched only when spec.gitOps asks to suspend them.
func gitOpsNeeds(m Move) []Need {
	gitOpsVerbs := []string{"get", "list"}
	if m.GitOps == movev1alpha1.GitOpsSuspend {
		gitOpsVerbs = append(gitOpsVerbs, "patch")
	}
	var out []Need
	for _, k := range gitOpsKinds {
		k.verbs = gitOpsVerbs
		out = append(out, fixedNeeds(m, movev1alpha1.ClusterSource, []fixed{k})...)
	}
	return out
}

// kindNeeds returns the requests on the kinds that move, in both clusters,
// and on the kinds only the target has, which a rollback lists.
func kindNeeds(m Move) []Need {
	var out []Need
	moved := map[[2]string]bool{}
	for _, k := range m.SourceKinds {
		moved[[2]string{k.Group, k.Resource}] = true
		out = append(out, movedKindNeeds(k)...)
	}
	for _, k := range m.TargetKinds {
		if moved[[2]string{k.Group, k.Resource}] || !k.Namespaced {
			continue
		}
		for _, v := range targetOnlyVerbs {
			out = append(out, Need{Cluster: movev1alpha1.ClusterTarget, Verb: v, Group: k.Group, Resource: k.Resource})
		}
	}
	return out
}

// movedKindNeeds returns the requests on one kind that moves: read and
// removed in the source (only read and patched there when cluster-scoped),
// written in the target.
func movedKindNeeds(k Kind) []Need {
	var out []Need
	verbs := sourceObjectVerbs
	if !k.Namespaced {
		verbs = sourceGlobalVerbs
	}
	for _, v := range verbs {
		out = append(out, Need{Cluster: movev1alpha1.ClusterSource, Verb: v, Group: k.Group, Resource: k.Resource})
	}
	for _, v := range targetObjectVerbs {
		out = append(out, Need{Cluster: movev1alpha1.ClusterTarget, Verb: v, Group: k.Group, Resource: k.Resource})
	}
	if k.Group != "" {
		// The status of a copy is written through the status
		// subresource; the core kinds that move (Secrets,
		// ConfigMaps) have none.
		out = append(out, Need{Cluster: movev1alpha1.ClusterTarget, Verb: "patch", Group: k.Group, Resource: k.Resource + "/status"})
	}
	return out
}

// Operator returns what the operator needs in the source besides a move:
// its own API, the core events leader election records, and the reviews
// of its metrics endpoint. With Needs it
// is everything the source's ClusterRole must grant.
func Operator() []Need {
	src := movev1alpha1.ClusterSource
	var out []Need
	for _, v := range []string{"get", "list", "watch", "update", "patch"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: movev1alpha1.GroupVersion.Group, Resource: "moveoperations"})
	}
	for _, v := range []string{"get", "update", "patch"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: movev1alpha1.GroupVersion.Group, Resource: "moveoperations/status"})
	}
	out = append(out, Need{Cluster: src, Verb: "update", Group: movev1alpha1.GroupVersion.Group, Resource: "moveoperations/finalizers"})
	// BackupSchedules: read, their status written, their backups
	// (MoveOperations) created and, past the history limits, deleted.
	for _, v := range []string{"get", "list", "watch"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: movev1alpha1.GroupVersion.Group, Resource: "backupschedules"})
	}
	for _, v := range []string{"get", "update", "patch"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: movev1alpha1.GroupVersion.Group, Resource: "backupschedules/status"})
	}
	for _, v := range []string{"create", "delete"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: movev1alpha1.GroupVersion.Group, Resource: "moveoperations"})
	}
	for _, v := range []string{"create", "patch"} {
		out = append(out, Need{Cluster: src, Verb: v, Group: "", Resource: "events"})
	}
	// A move is held to its creator's rights (package creator): the
	// admission policy that checked them is read, and the rights are asked
	// with SubjectAccessReviews (also used by the metrics endpoint below).
	out = append(out,
		Need{Cluster: src, Verb: "get", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"},
		Need{Cluster: src, Verb: "list", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"})
	// The metrics endpoint authenticates and authorizes its callers
	// (controller-runtime's filters.WithAuthenticationAndAuthorization).
	out = append(out,
		Need{Cluster: src, Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		Need{Cluster: src, Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"})
	return out
}

// Reviews returns what Check itself needs in both clusters: creating
// SelfSubjectAccessReviews. Every authenticated user may (the default
// system:basic-user binding), and asking whether one may ask is no
// question, so Needs leaves it out; a role that grants it explicitly is
// not granting too much.
func Reviews() []Need {
	var out []Need
	for _, c := range []movev1alpha1.ClusterRole{movev1alpha1.ClusterSource, movev1alpha1.ClusterTarget} {
		out = append(out, Need{Cluster: c, Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"})
	}
	return out
}

// Compact sorts needs and drops repetitions, and namespaced needs that a
// cluster-wide need of the same verb and resource covers.
func Compact(needs []Need) []Need {
	wide := map[Need]bool{}
	for _, n := range needs {
		if n.Namespace == "" {
			wide[n] = true
		}
	}
	out := make([]Need, 0, len(needs))
	for _, n := range needs {
		w := n
		w.Namespace = ""
		if n.Namespace != "" && wide[w] {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, compareNeeds)
	return slices.Compact(out)
}

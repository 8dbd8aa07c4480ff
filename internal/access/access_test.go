package access_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
)

const (
	src = movev1alpha1.ClusterSource
	tgt = movev1alpha1.ClusterTarget
)

var bareMetalHosts = access.Kind{Group: "metal3.io", Resource: "baremetalhosts", Namespaced: true}

// verbsOf returns the verbs of the needs on one resource of one cluster,
// in one namespace.
func verbsOf(needs []access.Need, cluster movev1alpha1.ClusterRole, group, resource, namespace string) []string {
	var out []string
	for _, n := range needs {
		if n.Cluster == cluster && n.Group == group && n.Resource == resource && n.Namespace == namespace {
			out = append(out, n.Verb)
		}
	}
	return out
}

func TestWhatAMoveNeeds(t *testing.T) {
	base := access.Move{Namespace: "ops", ClaimNamespace: "move-operator-system"}
	for _, tc := range []struct {
		name      string
		move      func(m *access.Move)
		cluster   movev1alpha1.ClusterRole
		group     string
		resource  string
		namespace string
		want      []string
	}{{
		name:    "a kind that moves is read, patched and deleted in the source, never created there",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{bareMetalHosts} },
		cluster: src, group: "metal3.io", resource: "baremetalhosts",
		want: []string{"get", "list", "patch", "delete"},
	}, {
		name:    "a kind that moves is created, validated by a dry-run update, patched and deleted on rollback in the target",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{bareMetalHosts} },
		cluster: tgt, group: "metal3.io", resource: "baremetalhosts",
		want: []string{"get", "list", "create", "update", "patch", "delete"},
	}, {
		name:    "the status of a copied custom resource is patched in the target through its subresource",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{bareMetalHosts} },
		cluster: tgt, group: "metal3.io", resource: "baremetalhosts/status",
		want: []string{"patch"},
	}, {
		name:    "a moved core kind has no status subresource to write",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{{Resource: "secrets", Namespaced: true}} },
		cluster: tgt, resource: "secrets/status",
	}, {
		name:    "a cluster-scoped kind is copied but never deleted from the source",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{{Group: "ipam.example.io", Resource: "pools"}} },
		cluster: src, group: "ipam.example.io", resource: "pools",
		want: []string{"get", "list", "patch"},
	}, {
		name: "a kind only the target has is only listed, by a rollback emptying a namespace",
		move: func(m *access.Move) {
			m.SourceKinds = []access.Kind{bareMetalHosts}
			m.TargetKinds = []access.Kind{bareMetalHosts, {Group: "tinkerbell.org", Resource: "hardware", Namespaced: true}}
		},
		cluster: tgt, group: "tinkerbell.org", resource: "hardware",
		want: []string{"list"},
	}, {
		name:    "a kind of the target only is nothing in the source",
		move:    func(m *access.Move) { m.TargetKinds = []access.Kind{bareMetalHosts} },
		cluster: src, group: "metal3.io", resource: "baremetalhosts",
	}, {
		name:    "namespaces are created and deleted in the target",
		cluster: tgt, resource: "namespaces",
		want: []string{"get", "create", "delete"},
	}, {
		name:    "namespaces are only read in the source",
		cluster: src, resource: "namespaces",
		want: []string{"get"},
	}, {
		name:    "the webhook bypass updates webhook configurations in both clusters",
		cluster: tgt, group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations",
		want: []string{"get", "list", "update"},
	}, {
		name:    "the claim's Lease is checked in the operator's namespace",
		cluster: src, group: "coordination.k8s.io", resource: "leases", namespace: "move-operator-system",
		want: []string{"get", "create", "update", "delete"},
	}, {
		name:    "the plan record is created beside the MoveOperation",
		cluster: src, resource: "configmaps", namespace: "ops",
		want: []string{"list", "create", "delete"},
	}, {
		name:    "the plan record's reads are covered by the moved ConfigMaps' cluster-wide needs",
		move:    func(m *access.Move) { m.SourceKinds = []access.Kind{{Resource: "configmaps", Namespaced: true}} },
		cluster: src, resource: "configmaps", namespace: "ops",
		want: []string{"create"},
	}, {
		name:    "nothing of the record or the claim is asked of the target",
		cluster: tgt, group: "coordination.k8s.io", resource: "leases", namespace: "move-operator-system",
	}, {
		name:    "GitOps managers are only read when spec.gitOps is not Suspend",
		cluster: src, group: "kustomize.toolkit.fluxcd.io", resource: "kustomizations",
		want: []string{"get", "list"},
	}, {
		name:    "GitOps managers are patched when spec.gitOps is Suspend",
		move:    func(m *access.Move) { m.GitOps = movev1alpha1.GitOpsSuspend },
		cluster: src, group: "argoproj.io", resource: "applications",
		want: []string{"get", "list", "patch"},
	}, {
		name:    "events of the MoveOperation are written beside it",
		cluster: src, group: "events.k8s.io", resource: "events", namespace: "ops",
		want: []string{"create", "patch"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := base
			if tc.move != nil {
				tc.move(&m)
			}
			got := verbsOf(access.Needs(m), tc.cluster, tc.group, tc.resource, tc.namespace)
			if !slices.Equal(got, tc.want) {
				t.Errorf("verbs on %s %s/%s in %q:\n got %q\nwant %q", tc.cluster, tc.group, tc.resource, tc.namespace, got, tc.want)
			}
		})
	}
}

func TestNeedsAreListedOnce(t *testing.T) {
	needs := access.Needs(access.Move{
		SourceKinds: []access.Kind{bareMetalHosts, {Resource: "secrets", Namespaced: true}, {Resource: "secrets", Namespaced: true}},
		TargetKinds: []access.Kind{bareMetalHosts},
		Namespace:   "ops", ClaimNamespace: "ops",
	})
	seen := map[access.Need]bool{}
	for _, n := range needs {
		if seen[n] {
			t.Errorf("%+v is listed twice", n)
		}
		seen[n] = true
	}
}

func TestMissingNeedsAreNamedAsRulesToPaste(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing []access.Need
		want    string
	}{{
		name:    "nothing missing says nothing",
		missing: nil,
		want:    "",
	}, {
		name: "the verbs of one resource make one rule, in the usual order",
		missing: []access.Need{
			{Cluster: src, Verb: "delete", Group: "metal3.io", Resource: "baremetalhosts"},
			{Cluster: src, Verb: "list", Group: "metal3.io", Resource: "baremetalhosts"},
			{Cluster: src, Verb: "get", Group: "metal3.io", Resource: "baremetalhosts"},
		},
		want: `the operator's identity may not do what the move does: source cluster: get, list, delete baremetalhosts.metal3.io. ` +
			`Grant it in each cluster named with a ClusterRole labelled move.cluster.x-k8s.io/aggregate-to-manager: "true" (aggregated into the operator's role there, see docs/access.md), then create a new MoveOperation. Its rules:
# source cluster
- apiGroups: ["metal3.io"]
  resources: ["baremetalhosts"]
  verbs: ["get","list","delete"]`,
	}, {
		name: "rules are grouped per cluster, per group and resource, a namespaced need named with its namespace",
		missing: []access.Need{
			{Cluster: tgt, Verb: "create", Resource: "namespaces"},
			{Cluster: tgt, Verb: "patch", Group: "metal3.io", Resource: "baremetalhosts/status"},
			{Cluster: src, Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ops"},
			{Cluster: tgt, Verb: "create", Group: "metal3.io", Resource: "baremetalhosts"},
		},
		want: `the operator's identity may not do what the move does: source cluster: create leases.coordination.k8s.io in namespace ops; ` +
			`target cluster: create namespaces; target cluster: create baremetalhosts.metal3.io; target cluster: patch baremetalhosts.metal3.io/status. ` +
			`Grant it in each cluster named with a ClusterRole labelled move.cluster.x-k8s.io/aggregate-to-manager: "true" (aggregated into the operator's role there, see docs/access.md), then create a new MoveOperation. Its rules:
# source cluster
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# target cluster
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["create"]
- apiGroups: ["metal3.io"]
  resources: ["baremetalhosts"]
  verbs: ["create"]
- apiGroups: ["metal3.io"]
  resources: ["baremetalhosts/status"]
  verbs: ["patch"]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := access.Message(tc.missing); got != tc.want {
				t.Errorf("message:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// forbidden is the error the API server returns when its authorizer refuses
// a request (apiserver's responsewriters.forbiddenMessage).
func forbidden(resource, name, message string) error {
	return apierrors.NewForbidden(schema.ParseGroupResource(resource), name, errors.New(message))
}

func TestAnAuthorizersRefusalIsToldApartFromOther403s(t *testing.T) {
	const user = "system:serviceaccount:move-operator-system:move-operator-controller-manager"
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("unable to create new content in namespace ns1 because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{Type: "NamespaceTerminating", Message: "namespace ns1 is being terminated"})
	for _, tc := range []struct {
		name string
		err  error
		want *access.Denial
	}{{
		name: "a cluster-scoped list refused by RBAC is a denial",
		err:  forbidden("baremetalhosts.metal3.io", "", `User "`+user+`" cannot list resource "baremetalhosts" in API group "metal3.io" at the cluster scope`),
		want: &access.Denial{User: user, Verb: "list", Group: "metal3.io", Resource: "baremetalhosts"},
	}, {
		name: "a namespaced create refused by RBAC names its namespace",
		err:  forbidden("namespaces", "ns1", `User "`+user+`" cannot create resource "machines" in API group "cluster.x-k8s.io" in the namespace "ns1"`),
		want: &access.Denial{User: user, Verb: "create", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns1"},
	}, {
		name: "a refused subresource keeps the subresource",
		err:  forbidden("clusters.cluster.x-k8s.io", "c1", `User "`+user+`" cannot patch resource "clusters/status" in API group "cluster.x-k8s.io" in the namespace "ns1"`),
		want: &access.Denial{User: user, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "clusters/status", Namespace: "ns1"},
	}, {
		name: "a core resource has the empty group",
		err:  forbidden("namespaces", "", `User "`+user+`" cannot create resource "namespaces" in API group "" at the cluster scope`),
		want: &access.Denial{User: user, Verb: "create", Resource: "namespaces"},
	}, {
		name: "the authorizer's reason after the message does not hide the denial",
		err:  forbidden("leases.coordination.k8s.io", "l", `User "`+user+`" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "ops": RBAC: role.rbac.authorization.k8s.io "x" not found`),
		want: &access.Denial{User: user, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ops"},
	}, {
		name: "a denial wrapped with context is still a denial",
		err: fmt.Errorf("copying group 2: %w", errors.Join(errors.New("other"), fmt.Errorf("copying Machine ns1/m1 to target: %w",
			forbidden("machines.cluster.x-k8s.io", "m1", `User "u" cannot create resource "machines" in API group "cluster.x-k8s.io" in the namespace "ns1"`)))),
		want: &access.Denial{User: "u", Verb: "create", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns1"},
	}, {
		name: "an admission webhook's denial is not an authorizer's",
		err:  forbidden("clusters.cluster.x-k8s.io", "c1", `admission webhook "validation.cluster.cluster.x-k8s.io" denied the request: spec.topology is immutable`),
	}, {
		name: "a webhook quoting an authorizer's message is still the webhook's denial",
		err:  forbidden("clusters.cluster.x-k8s.io", "c1", `admission webhook "policy.example.com" denied the request: x is forbidden: User "u" cannot get resource "y" in API group "" at the cluster scope`),
	}, {
		name: "a namespace being terminated is not a denial",
		err:  terminating,
	}, {
		name: "a refused non-resource path is not a denial of a resource",
		err:  forbidden("", "", `User "u" cannot get path "/metrics"`),
	}, {
		name: "a conflict is not a denial",
		err:  apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "s", errors.New(`User "u" cannot list resource "x" in API group "" at the cluster scope`)),
	}, {
		name: "a plain error is not a denial",
		err:  errors.New(`secrets is forbidden: User "u" cannot list resource "secrets" in API group "" at the cluster scope`),
	}, {
		name: "no error is not a denial",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := access.Denied(tc.err)
			switch {
			case tc.want == nil && ok:
				t.Errorf("want no denial, got %+v", got)
			case tc.want != nil && !ok:
				t.Errorf("want %+v, got no denial", *tc.want)
			case tc.want != nil && got != *tc.want:
				t.Errorf("denial:\n got %+v\nwant %+v", got, *tc.want)
			}
		})
	}
}

func TestADenialMessageNamesTheRuleThatGrantsIt(t *testing.T) {
	d := access.Denial{User: "u", Verb: "create", Group: "cluster.x-k8s.io", Resource: "machines", Namespace: "ns1"}
	for _, tc := range []struct {
		name    string
		cluster movev1alpha1.ClusterRole
		want    []string
	}{{
		name:    "a known cluster is named",
		cluster: tgt,
		want:    []string{"access denied in the target cluster", `"u" may not create machines.cluster.x-k8s.io in namespace ns1`, "- apiGroups: [\"cluster.x-k8s.io\"]\n  resources: [\"machines\"]\n  verbs: [\"create\"]", access.AggregationLabel},
	}, {
		name: "an unknown cluster is said to be either, by the identity refused",
		want: []string{"in the source or the target cluster", `"u" may not create`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := access.DeniedMessage(tc.cluster, d, errors.New("the error"))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("message %q lacks %q", got, w)
				}
			}
		})
	}
}

// reviewer answers SelfSubjectAccessReviews from a set of allowed needs.
func reviewer(t *testing.T, cluster movev1alpha1.ClusterRole, allowed map[access.Need]bool, asked *atomic.Int32, fail error) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			r, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return fmt.Errorf("unexpected create of %T", obj)
			}
			if fail != nil {
				return fail
			}
			asked.Add(1)
			a := r.Spec.ResourceAttributes
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			r.Status.Allowed = allowed[access.Need{Cluster: cluster, Verb: a.Verb, Group: a.Group, Resource: res, Namespace: a.Namespace}]
			return nil
		},
	}).Build()
}

func TestCheckAsksEachClusterAndReturnsWhatItRefuses(t *testing.T) {
	needs := []access.Need{
		{Cluster: src, Verb: "list", Group: "metal3.io", Resource: "baremetalhosts"},
		{Cluster: src, Verb: "get", Group: "metal3.io", Resource: "baremetalhosts"},
		{Cluster: tgt, Verb: "create", Resource: "namespaces"},
		{Cluster: tgt, Verb: "patch", Group: "metal3.io", Resource: "baremetalhosts/status"},
		{Cluster: src, Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ops"},
	}
	allowedSource := map[access.Need]bool{needs[1]: true, needs[4]: true}
	allowedTarget := map[access.Need]bool{needs[2]: true}
	for _, tc := range []struct {
		name    string
		clients func(asked *atomic.Int32) map[movev1alpha1.ClusterRole]client.Client
		want    []access.Need
		asked   int32
		wantErr string
	}{{
		name: "what each cluster refuses is returned, subresources and namespaces as asked",
		clients: func(asked *atomic.Int32) map[movev1alpha1.ClusterRole]client.Client {
			return map[movev1alpha1.ClusterRole]client.Client{src: reviewer(t, src, allowedSource, asked, nil), tgt: reviewer(t, tgt, allowedTarget, asked, nil)}
		},
		want:  []access.Need{needs[0], needs[3]},
		asked: 5,
	}, {
		name: "a cluster without a client is not asked",
		clients: func(asked *atomic.Int32) map[movev1alpha1.ClusterRole]client.Client {
			return map[movev1alpha1.ClusterRole]client.Client{src: reviewer(t, src, allowedSource, asked, nil)}
		},
		want:  []access.Need{needs[0]},
		asked: 3,
	}, {
		name: "a review that cannot be asked is an error naming the cluster",
		clients: func(asked *atomic.Int32) map[movev1alpha1.ClusterRole]client.Client {
			return map[movev1alpha1.ClusterRole]client.Client{tgt: reviewer(t, tgt, nil, asked, errors.New("connection refused"))}
		},
		wantErr: "target cluster: asking whether the operator may",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			got, err := access.Check(context.Background(), tc.clients(&asked), needs, 2)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("missing:\n got %+v\nwant %+v", got, tc.want)
			}
			if asked.Load() != tc.asked {
				t.Errorf("asked %d reviews, want %d", asked.Load(), tc.asked)
			}
		})
	}
}

func TestAGroupGrantedWholeIsAskedOnceAndAGroupGrantedInPartsResourceByResource(t *testing.T) {
	kinds := func(group string, resources ...string) []access.Need {
		var out []access.Need
		for _, r := range resources {
			out = append(out, access.Need{Cluster: src, Verb: "patch", Group: group, Resource: r}, access.Need{Cluster: src, Verb: "patch", Group: group, Resource: r + "/status"})
		}
		return out
	}
	whole := kinds("cluster.x-k8s.io", "clusters", "machines", "machinesets")
	parts := kinds("metal3.io", "baremetalhosts", "firmwareschemas", "hostfirmwaresettings")
	core := []access.Need{{Cluster: src, Verb: "patch", Resource: "secrets"}, {Cluster: src, Verb: "patch", Resource: "configmaps"}, {Cluster: src, Verb: "patch", Resource: "services"}}
	allowed := map[access.Need]bool{
		// The role grants "*" in cluster.x-k8s.io, subresources included,
		// as the installer's roles grant Cluster API's groups.
		{Cluster: src, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "*"}:        true,
		{Cluster: src, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "*/status"}: true,
	}
	// metal3.io resource by resource, all but one status.
	for _, n := range parts[:len(parts)-1] {
		allowed[n] = true
	}
	for _, n := range core {
		allowed[n] = true
	}
	var asked atomic.Int32
	got, err := access.Check(context.Background(), map[movev1alpha1.ClusterRole]client.Client{src: reviewer(t, src, allowed, &asked, nil)},
		slices.Concat(whole, parts, core), 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := parts[len(parts)-1:]; !slices.Equal(got, want) {
		t.Errorf("missing:\n got %+v\nwant %+v: the need a refused wildcard covers is asked, and named, alone", got, want)
	}
	// 2 wildcards of cluster.x-k8s.io answer for its 6 needs; metal3.io's
	// 2 wildcards are refused and its 6 needs asked one by one; the core
	// group is never asked whole: 2 + 2 + 6 + 3.
	if asked.Load() != 13 {
		t.Errorf("asked %d reviews, want 13", asked.Load())
	}
}

// TestTheFixedNeedsAreAskedOneByOne: the groups a move needs whatever
// moves (the webhook configurations, cluster-api-operator's providers) are
// granted resource by resource by the installer's roles, so their wildcard
// is never asked: it would be refused, a review more than the needs.
func TestTheFixedNeedsAreAskedOneByOne(t *testing.T) {
	needs := []access.Need{
		{Cluster: src, Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"},
		{Cluster: src, Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
		{Cluster: src, Verb: "list", Group: "operator.cluster.x-k8s.io", Resource: "coreproviders"},
		{Cluster: src, Verb: "list", Group: "operator.cluster.x-k8s.io", Resource: "infrastructureproviders"},
	}
	allowed := map[access.Need]bool{needs[0]: true, needs[1]: true, needs[2]: true}
	var asked atomic.Int32
	got, err := access.Check(context.Background(), map[movev1alpha1.ClusterRole]client.Client{src: reviewer(t, src, allowed, &asked, nil)}, needs, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := needs[3:]; !slices.Equal(got, want) {
		t.Errorf("missing:\n got %+v\nwant %+v", got, want)
	}
	if asked.Load() != 4 {
		t.Errorf("asked %d reviews, want 4: one per need, no wildcard", asked.Load())
	}
}

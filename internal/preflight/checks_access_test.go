package preflight_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/preflight"
)

func TestAccessIsCheckedOnceTheKindsAreKnownAndBeforeAnythingListsThem(t *testing.T) {
	var names []string
	for _, c := range preflight.Checks() {
		names = append(names, c.Name)
	}
	i := slices.Index(names, "access")
	// The checks before it read only the namespaces named, the target's
	// kube-system and the CRDs; every later one reads the moved kinds, the
	// providers or the Deployments, which the access check covers.
	want := []string{"creator-policy", "creator", "selectors", "namespaces", "target", "kinds"}
	if i < 0 || !slices.Equal(names[:i], want) {
		t.Fatalf("checks %v: want %v, then access", names, want)
	}
}

// denyingSource answers every SelfSubjectAccessReview but those on one
// resource with yes.
func denyingSource(resource string) client.Client {
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			r.Status.Allowed = r.Spec.ResourceAttributes.Resource != resource
			return nil
		},
	}).Build()
}

func TestMissingAccessIsAFindingAndTheChecksThatNeedItDoNotRun(t *testing.T) {
	bmh := graph.Type{GVK: schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}, Resource: "baremetalhosts", Namespaced: true}
	for _, tc := range []struct {
		name     string
		denied   string
		findings []string
		laterRan bool
	}{{
		name:     "a kind the operator may not list fails the move naming the rule, and nothing lists it",
		denied:   "baremetalhosts",
		findings: []string{"access:" + movev1alpha1.ReasonAccessDenied},
	}, {
		name:     "with every access granted the later checks run",
		denied:   "nothing",
		laterRan: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &preflight.Env{
				Source:      denyingSource(tc.denied),
				SourceTypes: graph.NewTypes(append(graph.CoreTypes(), bmh)...),
				Namespace:   "ops", ClaimNamespace: "move-operator-system",
			}
			var checks []preflight.Check
			for _, c := range preflight.Checks() {
				if c.Name == "access" {
					checks = append(checks, c)
				}
			}
			laterRan := false
			checks = append(checks, preflight.Check{Name: "plan", Run: func(context.Context, *preflight.Env) error { laterRan = true; return nil }})
			if err := preflight.Evaluate(context.Background(), e, checks); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range e.Findings {
				got = append(got, f.Check+":"+f.Reason)
				if f.Retry {
					t.Errorf("missing access fails the move; a human adds the rule and applies a new MoveOperation: %+v", f)
				}
				for _, w := range []string{"source cluster: get, list, patch, delete baremetalhosts.metal3.io", `- apiGroups: ["metal3.io"]`} {
					if !strings.Contains(f.Message, w) {
						t.Errorf("finding %q lacks %q", f.Message, w)
					}
				}
			}
			if !slices.Equal(got, tc.findings) {
				t.Errorf("findings %v, want %v", got, tc.findings)
			}
			if laterRan != tc.laterRan {
				t.Errorf("a later check ran: %v, want %v", laterRan, tc.laterRan)
			}
		})
	}
}

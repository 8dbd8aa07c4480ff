package access_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/access"
)

// A creator's rights are asked cluster-wide first: where granted
// everywhere no namespace is asked, so a cluster administrator's check
// costs one review per verb and resource however many namespaces a plan
// spans; where not, each namespace is asked, for the user named.
func TestCheckAsAsksClusterWideFirstAndEachNamespaceOnlyWhereThatIsRefused(t *testing.T) {
	var (
		mu    sync.Mutex
		asked []string
	)
	allowed := func(a *authorizationv1.ResourceAttributes) bool {
		switch a.Resource {
		case "*":
			return false // bob is no cluster administrator
		case "secrets":
			return true // everywhere
		case "clusters":
			return a.Namespace == "team-a" // her namespace only
		}
		return false
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SubjectAccessReview)
			if r.Spec.User != "bob" || !slices.Equal(r.Spec.Groups, []string{"team-a"}) {
				t.Errorf("asked about %q %v, not the creator", r.Spec.User, r.Spec.Groups)
			}
			a := r.Spec.ResourceAttributes
			mu.Lock()
			asked = append(asked, a.Verb+" "+a.Resource+" "+a.Namespace)
			mu.Unlock()
			r.Status.Allowed = allowed(a)
			return nil
		},
	}).Build()
	needs := []access.Need{
		{Verb: "get", Resource: "secrets", Namespace: "team-a"},
		{Verb: "get", Resource: "secrets", Namespace: "team-b"},
		{Verb: "delete", Group: "cluster.x-k8s.io", Resource: "clusters", Namespace: "team-a"},
		{Verb: "delete", Group: "cluster.x-k8s.io", Resource: "clusters", Namespace: "team-b"},
	}
	missing, err := access.CheckAs(context.Background(), c, access.User{Name: "bob", Groups: []string{"team-a"}}, needs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != needs[3] {
		t.Errorf("missing %+v, want only %+v", missing, needs[3])
	}
	slices.Sort(asked)
	want := []string{"* * ", "delete clusters ", "delete clusters team-a", "delete clusters team-b", "get secrets "}
	if !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
}

func TestCheckAsAsksOnceForAClusterAdministrator(t *testing.T) {
	reviews := 0
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			reviews++
			r := obj.(*authorizationv1.SubjectAccessReview)
			a := r.Spec.ResourceAttributes
			r.Status.Allowed = a.Verb == "*" && a.Group == "*" && a.Resource == "*" && a.Namespace == ""
			return nil
		},
	}).Build()
	needs := []access.Need{{Verb: "get", Resource: "secrets", Namespace: "team-a"}, {Verb: "get", Resource: "secrets", Namespace: "capl-system", Name: "credentials"}}
	missing, err := access.CheckAs(context.Background(), c, access.User{Name: "admin", Groups: []string{"system:masters"}}, needs, 1)
	if err != nil || len(missing) > 0 || reviews != 1 {
		t.Fatalf("missing %v, error %v, %d reviews: want nothing missing after one review", missing, err, reviews)
	}
}

package preflight_test

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/preflight"
)

// sourceWithPolicy serves the shipped admission policy (when installed)
// and answers SubjectAccessReviews: yes, except on resource denied (and on
// everything at once).
func sourceWithPolicy(installed bool, denied string) client.Client {
	b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if r, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				// Nobody here may do everything: each right is asked.
				resource := r.Spec.ResourceAttributes.Resource
				r.Status.Allowed = resource != denied && resource != "*"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	if installed {
		p, pb := creator.Policy()
		p.Name, pb.Name, pb.Spec.PolicyName = creator.PolicyName, creator.PolicyName, creator.PolicyName
		b = b.WithObjects(p, pb)
	}
	return b.Build()
}

func TestTheCreatorIsCheckedFirstAndARefusalEndsTheChecks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		installed bool
		denied    string
		anonymous bool
		finding   string
	}{
		{name: "a creator who may do it all: the checks go on", installed: true, denied: "nothing"},
		{name: "no policy: nobody's MoveOperation goes on", installed: false, denied: "nothing", finding: movev1alpha1.ReasonAdmissionPolicyMissing},
		{name: "no creator named", installed: true, denied: "nothing", anonymous: true, finding: movev1alpha1.ReasonCreatorUnknown},
		{name: "a creator who may not read the Secrets", installed: true, denied: "secrets", finding: movev1alpha1.ReasonCreatorNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{
				Namespace: "tenant-a", Name: "move", CreationTimestamp: metav1.NewTime(time.Now().Add(time.Hour)),
				Annotations: map[string]string{movev1alpha1.CreatedByAnnotation: "bob"},
			}, Spec: movev1alpha1.MoveOperationSpec{Namespaces: []string{"team-a"}}}
			if tc.anonymous {
				mo.Annotations = nil
			}
			e := &preflight.Env{Object: mo, CreatorPolicy: creator.PolicyName, Spec: mo.Spec, Namespace: mo.Namespace, Source: sourceWithPolicy(tc.installed, tc.denied)}
			var checks []preflight.Check
			for _, c := range preflight.Checks() {
				if c.Name == "creator-policy" || c.Name == "creator" {
					checks = append(checks, c)
				}
			}
			laterRan := false
			checks = append(checks, preflight.Check{Name: "selectors", Run: func(context.Context, *preflight.Env) error { laterRan = true; return nil }})
			if err := preflight.Evaluate(context.Background(), e, checks); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range e.Findings {
				got = append(got, f.Reason)
			}
			if tc.finding == "" {
				if len(got) > 0 || !laterRan {
					t.Fatalf("findings %v, later checks ran %v", got, laterRan)
				}
				return
			}
			if !slices.Equal(got, []string{tc.finding}) || laterRan {
				t.Fatalf("findings %v (want only %s), later checks ran %v (want none)", got, tc.finding, laterRan)
			}
		})
	}
}

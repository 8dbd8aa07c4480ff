//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/movetest"
)

// The operator is a deputy: these tests create MoveOperations as real
// users (impersonated, with RBAC of their own, never admin) and show that
// a move takes only what its creator may take, and that without the
// admission policy nobody's MoveOperation moves anything.

// impersonate returns a client of the source acting as user.
func impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := client.New(installed.Impersonating(movetest.Env.Source.Config, user), client.Options{Scheme: movetest.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant creates, until the test ends, a binding of user to a role in
// namespace (a ClusterRoleBinding when namespace is empty), and the role
// itself when rules are given.
func grant(t *testing.T, user, namespace, roleName string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	kind := "ClusterRole"
	var role, binding client.Object
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}
	switch {
	case namespace == "":
		role = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules}
		binding = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}, Subjects: subjects}
	case len(rules) > 0:
		kind = "Role"
		role = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: roleName}, Rules: rules}
		fallthrough
	default:
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: roleName + "-" + user},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}, Subjects: subjects}
	}
	for _, obj := range []client.Object{role, binding} {
		if obj == nil || (obj == role && len(rules) == 0) {
			continue
		}
		g.Expect(movetest.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = movetest.Client.Delete(context.Background(), obj) })
	}
}

var everything = rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}

// foreignWrites records the operator's writes to anything but the
// MoveOperations and its claim: what a refused move must never make.
type foreignWrites struct {
	mu     sync.Mutex
	writes []string
}

func (f *foreignWrites) observe(cluster, verb string, obj client.Object) {
	switch obj.(type) {
	case *movev1alpha1.MoveOperation, *coordinationv1.Lease:
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, fmt.Sprintf("%s %s %T %s/%s", cluster, verb, obj, obj.GetNamespace(), obj.GetName()))
}

func (f *foreignWrites) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

func (f *foreignWrites) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = nil
}

func TestATenantMovesOnlyWhatSheMayAndTheOperatorAsksOverTheWholePlan(t *testing.T) {
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "tenant" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 2, Workers: ptr.To(1), Namespaces: []string{prefix + "-a"}, Name: prefix})
	own := f.Namespaces[0]
	tenant := movetest.OpsNamespace(t)
	user := "tenant-" + prefix
	grant(t, user, tenant, "move-operator-mover")
	grant(t, user, tenant, "edit")
	for _, ns := range f.Namespaces {
		grant(t, user, ns, "everything", everything)
	}
	writes := &foreignWrites{}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: writes.observe})
	her := impersonate(t, user)
	newMove := func(name string) *movev1alpha1.MoveOperation {
		mo := &movev1alpha1.MoveOperation{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name},
			Spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: []string{own}}}
		g.Eventually(func() error { return her.Create(ctx, mo) }).WithTimeout(10*time.Second).Should(Succeed(), "the policy admits her own namespace")
		t.Cleanup(func() { movetest.DeleteMoveOperation(t, mo) })
		return mo
	}

	// Her fleet's cluster-scoped identity and its credentials Secret, in
	// a namespace she never named, would go with her clusters.
	refused := newMove("beyond-her-rights")
	failed, _ := movetest.WaitForPhase(t, refused, movev1alpha1.PhaseFailed, time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonCreatorNotAllowed))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring(fmt.Sprintf("creator %q may not get", user)))
	g.Expect(failed.Status.FailureMessage).To(Or(ContainSubstring("in namespace "+fleet.ProviderNamespace), ContainSubstring("at the cluster scope")))
	t.Logf("refused: %s", failed.Status.FailureMessage)
	g.Expect(failed.Status.Plan).To(BeNil(), "a creator refused is not shown what the source holds")
	g.Expect(writes.list()).To(BeEmpty(), "nothing is written in either cluster on her behalf")

	// Granted the identity and exactly its credentials Secret (by name: the
	// provider's namespace holds other tenants' credentials too), her move
	// goes through: the operator asks by name what a namespace refuses.
	grant(t, user, "", "read-identities-"+prefix, rbacv1.PolicyRule{
		APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"loopclusteridentities"}, Verbs: []string{"get"}})
	grant(t, user, fleet.ProviderNamespace, "read-credentials-"+prefix, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{f.Identities[0] + "-credentials"}})
	writes.reset()
	moved := newMove("within-her-rights")
	movetest.WaitForPhase(t, moved, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(writes.list()).NotTo(BeEmpty())
}

// setAside deletes an admission binding until the test ends, and waits
// until MoveOperations are admitted without it.
func setAside(t *testing.T, binding client.Object) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(movetest.Client.Get(ctx, client.ObjectKeyFromObject(binding), binding)).To(Succeed())
	g.Expect(movetest.Client.Delete(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		binding.SetResourceVersion("")
		binding.SetUID("")
		binding.SetCreationTimestamp(metav1.Time{})
		binding.SetManagedFields(nil)
		if err := movetest.Client.Create(context.Background(), binding); err != nil {
			t.Errorf("putting %s back: %v", binding.GetName(), err)
		}
	})
}

func TestWithoutTheAdmissionPolicyNobodysMoveOperationMovesAnything(t *testing.T) {
	movetest.EnsureSetup(t)
	g := NewWithT(t)
	ctx := context.Background()
	prefix := "nopolicy" + rand.String(4)
	f := movetest.CreateFleet(t, fleet.Options{Clusters: 1, Workers: ptr.To(0), Namespaces: []string{prefix + "-a"}, Name: prefix})
	tenant := movetest.OpsNamespace(t)
	user := "mallory-" + prefix
	grant(t, user, tenant, "move-operator-mover")
	grant(t, user, tenant, "edit")

	// An API server without the policies: nothing checks who she is, nor
	// what she may do, and nothing stops her naming an administrator.
	setAside(t, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: creator.PolicyName}})
	setAside(t, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: creator.InstallerPrefix + creator.MutatingPolicyBaseName}})
	review := &authenticationv1.SelfSubjectReview{}
	g.Expect(movetest.Client.Create(ctx, review)).To(Succeed())
	admin := review.Status.UserInfo
	mo := &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "forged", Annotations: map[string]string{
			movev1alpha1.CreatedByAnnotation: admin.Username, movev1alpha1.CreatedByGroupsAnnotation: strings.Join(admin.Groups, ","),
		}},
		Spec: movev1alpha1.MoveOperationSpec{Target: movetest.TargetRef("target"), Namespaces: f.Namespaces},
	}
	her := impersonate(t, user)
	g.Eventually(func() error {
		probe := mo.DeepCopy()
		if err := her.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Annotations[movev1alpha1.CreatedByAnnotation] != admin.Username {
			return fmt.Errorf("the mutating policy still applies")
		}
		return nil
	}).WithTimeout(30*time.Second).Should(Succeed(), "without the policies the API server admits anything")

	writes := &foreignWrites{}
	movetest.StartOperator(t, movetest.OperatorOptions{OnWrite: writes.observe})
	g.Expect(her.Create(ctx, mo)).To(Succeed())
	t.Cleanup(func() { movetest.DeleteMoveOperation(t, mo) })
	failed, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseFailed, time.Minute)
	g.Expect(failed.Status.FailureReason).To(Equal(movev1alpha1.ReasonAdmissionPolicyMissing))
	g.Expect(failed.Status.FailureMessage).To(ContainSubstring("no ValidatingAdmissionPolicyBinding"))
	g.Expect(writes.list()).To(BeEmpty(), "nothing is read for her, nothing written")
	g.Expect(failed.Status.Plan).To(BeNil())
}

//go:build cluster

package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/internal/targetaccess"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// The target credential of a move is replaced, halfway through Copying, by
// another ServiceAccount's token, and the ServiceAccount it replaced is
// deleted, so that its tokens are refused at once (a credential rotated by
// whatever refreshes it, under another identity). The move must use the
// new credential, move the webhook bypass in the target to the new
// identity, say so, and end Done with no bypass left for either identity.
func TestATargetCredentialRotatedToAnotherServiceAccountDuringCopyingIsUsedAndTheBypassFollowsIt(t *testing.T) {
	rc := movetest.NewRollbackCase(t, "rotation")
	ctx := context.Background()
	g := NewWithT(t)

	// Two ServiceAccounts of the test's own in the target, bound to the
	// target's ClusterRole as dist/target-access.yaml binds the shipped one:
	// the suite's shared target credential stays untouched.
	a := grantTargetAccess(t, "rotation-a-"+rand.String(4))
	b := grantTargetAccess(t, "rotation-b-"+rand.String(4))
	g.Expect(a.username).NotTo(Equal(b.username))
	movetest.NewSecret(t, rc.Ops, "rotating", map[string][]byte{"value": a.kubeconfig})

	// The first copy the operator makes in the target waits until the
	// Secret holds B's token and A is gone, then goes on with A's client.
	copying := make(chan struct{})
	rotated := make(chan struct{})
	var once sync.Once
	var refusedMu sync.Mutex
	var refused []string
	movetest.StartOperator(t, movetest.OperatorOptions{
		FailIf: func(cluster, verb string, obj client.Object) error {
			if cluster != "target" || verb != "create" || !isCopy(obj) {
				return nil
			}
			once.Do(func() {
				close(copying)
				select {
				case <-rotated:
				case <-time.After(2 * time.Minute):
				}
			})
			return nil
		},
		OnWriteError: func(cluster, verb string, obj client.Object, err error) {
			if cluster == "target" && apierrors.IsUnauthorized(err) {
				refusedMu.Lock()
				refused = append(refused, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
				refusedMu.Unlock()
			}
		},
	})
	mo := movetest.NewMoveOperation(t, rc.Ops, "rotation", movev1alpha1.MoveOperationSpec{
		Target:     movetest.TargetRef("rotating"),
		Namespaces: rc.Fleet.Namespaces,
		// Today's failure mode is a rollback once Copying made no
		// progress this long: short, so that it shows quickly.
		Timeouts: movev1alpha1.TimeoutsSpec{Copy: &metav1.Duration{Duration: time.Minute}},
	})

	select {
	case <-copying:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the move never began copying to the target: phase %s", movetest.Get(g, mo).Status.Phase)
	}
	g.Expect(movetest.Get(g, mo).Status.Phase).To(Equal(movev1alpha1.PhaseCopying))
	bypassed, err := quiesce.BypassedUsernames(ctx, movetest.Env.Target.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bypassed).To(Equal([]string{a.username}), "the bypass in the target lets A through while A copies")

	rotate(t, rc.Ops, "rotating", b.kubeconfig)
	a.delete(t)
	g.Eventually(func() bool {
		_, err := movetest.WhoAmI(a.kubeconfig)
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the token of a deleted ServiceAccount is refused")
	close(rotated)

	done, _ := movetest.WaitForPhase(t, mo, movev1alpha1.PhaseDone, 3*time.Minute)
	g.Expect(done.Status.FailureReason).To(BeEmpty())

	refusedMu.Lock()
	g.Expect(refused).NotTo(BeEmpty(), "the copy was made with A's credential after A was deleted, and refused: the rotation happened mid-Copying")
	refusedMu.Unlock()

	after := movetest.InNamespaces(movetest.Take(ctx, g, movetest.Env.Target, rc.Fleet.Namespaces), rc.Fleet.Namespaces...)
	if diff := snapshot.Diff(rc.Before, after); diff != "" {
		t.Fatalf("the target differs from the source before the move:\n%s", diff)
	}
	movetest.AssertNoMoveMarks(ctx, g, movetest.Env.Target.Client, rc.Fleet.Namespaces)

	g.Eventually(func(g Gomega) {
		notes := movetest.WarningNotes(ctx, g, mo, movev1alpha1.ReasonIdentityChanged)
		g.Expect(notes).To(ContainElement(And(ContainSubstring("target cluster"), ContainSubstring(b.username), ContainSubstring(a.username))),
			"a Warning event names the change of identity in the target")
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	for _, m := range []*testenv.Management{movetest.Env.Source, movetest.Env.Target} {
		left, err := quiesce.BypassInstalled(ctx, m.Client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(left).To(BeEmpty(), "no webhook bypass is left in %s", m.Name)
		g.Expect(matchConditionsNaming(ctx, g, m, a.username, b.username)).To(BeEmpty(), "no match condition in %s names either identity", m.Name)
	}
	g.Expect(movetest.StateOf(ctx, g)).To(Equal(rc.StateBefore), "the providers run as before, and the webhooks are as they were")
}

// isCopy reports whether an object the operator creates in the target is
// part of the copy: a moved object or its namespace (not a review, which
// stores nothing).
func isCopy(obj client.Object) bool {
	switch obj.(type) {
	case *unstructured.Unstructured, *corev1.Namespace:
		return true
	}
	return false
}

// targetIdentity is a ServiceAccount in the target with the target's
// ClusterRole, and a self-contained kubeconfig with its token.
type targetIdentity struct {
	key        types.NamespacedName
	username   string
	kubeconfig []byte
}

// grantTargetAccess makes a ServiceAccount of the given name in the target
// as users make the shipped one (internal/targetaccess with
// dist/target-access.yaml, to which it adds the ServiceAccount and its
// binding to the same ClusterRole), and removes it when the test ends.
func grantTargetAccess(t *testing.T, name string) *targetIdentity {
	t.Helper()
	movetest.EnsureSetup(t)
	root, err := testenv.RepositoryRoot("go test ./controllers/")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(root, installed.TargetAccessPath))
	if err != nil {
		t.Fatal(err)
	}
	ns := "move-operator-system" // the shipped ServiceAccount's, made by the manifest
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "move-operator-target"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	manifest := string(shipped)
	for _, obj := range []any{sa, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		manifest += "\n---\n" + string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubeconfig, _, err := targetaccess.Grant(ctx, movetest.Env.Target.Config, []byte(manifest), targetaccess.Options{ServiceAccount: name, Namespace: ns})
	if err != nil {
		t.Fatalf("granting ServiceAccount %s/%s access to the target: %v", ns, name, err)
	}
	id := &targetIdentity{key: types.NamespacedName{Namespace: ns, Name: name}, username: targetaccess.Username(types.NamespacedName{Namespace: ns, Name: name}), kubeconfig: kubeconfig}
	t.Cleanup(func() {
		id.delete(t)
		if err := movetest.Env.Target.Client.Delete(context.Background(), binding); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ClusterRoleBinding %s from the target: %v", name, err)
		}
	})
	return id
}

// delete deletes the ServiceAccount: the API server refuses its tokens from
// then on.
func (id *targetIdentity) delete(t *testing.T) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: id.key.Namespace, Name: id.key.Name}}
	if err := movetest.Env.Target.Client.Delete(context.Background(), sa); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting ServiceAccount %s from the target: %v", id.key, err)
	}
}

// rotate puts another kubeconfig into a Secret, as whatever refreshes a
// credential does.
func rotate(t *testing.T, ns, name string, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{}
	if err := movetest.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Data["value"] = kubeconfig
	if err := movetest.Client.Patch(context.Background(), s, patch); err != nil {
		t.Fatalf("rotating Secret %s/%s: %v", ns, name, err)
	}
}

// matchConditionsNaming lists the match conditions of a cluster's webhooks
// whose expression names one of the usernames.
func matchConditionsNaming(ctx context.Context, g Gomega, m *testenv.Management, usernames ...string) []string {
	var out []string
	check := func(kind, config, webhook string, conds []admissionregistrationv1.MatchCondition) {
		for _, c := range conds {
			for _, u := range usernames {
				if c.Name == quiesce.BypassConditionName || strings.Contains(c.Expression, u) {
					out = append(out, fmt.Sprintf("%s %s webhook %s: %s: %s", kind, config, webhook, c.Name, c.Expression))
				}
			}
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(m.Client.List(ctx, v)).To(Succeed())
	for _, cfg := range v.Items {
		for _, w := range cfg.Webhooks {
			check("ValidatingWebhookConfiguration", cfg.Name, w.Name, w.MatchConditions)
		}
	}
	mu := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	g.Expect(m.Client.List(ctx, mu)).To(Succeed())
	for _, cfg := range mu.Items {
		for _, w := range cfg.Webhooks {
			check("MutatingWebhookConfiguration", cfg.Name, w.Name, w.MatchConditions)
		}
	}
	return out
}

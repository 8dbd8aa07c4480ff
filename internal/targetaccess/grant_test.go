package targetaccess

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/remote"
	"github.com/move-operator/move-operator/test/localcluster"
)

// machineGVK is a Cluster API-like kind, in one of the groups the target
// role grants, that the test installs to show the ServiceAccount may do
// with it what a move does.
var machineGVK = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "TestMachine"}

// TestGrantAgainstARealCluster grants access to a local cluster as its
// administrator (as the test harness and `manager target-access` do), and
// checks what the kubeconfig it returns may and may not do there.
func TestGrantAgainstARealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, "targetaccess", localcluster.Options{Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred(), "starting a local cluster")
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the local cluster: %v", err)
		}
		if !t.Failed() {
			_ = cluster.RemoveLogs()
		} else {
			t.Logf("the cluster's logs are in %s", cluster.LogDir)
		}
	})
	admin := newTestClient(t, cluster.Config)
	manifest := readDist(t, "target-access.yaml")
	sa := types.NamespacedName{Namespace: "move-operator-system", Name: "move-operator-target"}

	began := time.Now()
	kubeconfig, expires, err := Grant(ctx, cluster.Config, manifest, Options{Duration: time.Hour})
	g.Expect(err).NotTo(HaveOccurred(), "the first Grant")
	asTarget := newTestClient(t, parse(t, kubeconfig))

	t.Run("the token lives as long as asked", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(expires).To(BeTemporally("~", began.Add(time.Hour), time.Minute))
	})

	t.Run("the kubeconfig is self-contained and acts as the target ServiceAccount", func(t *testing.T) {
		g := NewWithT(t)
		review := &authenticationv1.SelfSubjectReview{}
		g.Expect(asTarget.Create(ctx, review)).To(Succeed())
		g.Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:move-operator-system:move-operator-target"))
		g.Expect(Username(sa)).To(Equal(review.Status.UserInfo.Username))
	})

	t.Run("a second Grant changes nothing in the target and gives another working token", func(t *testing.T) {
		g := NewWithT(t)
		before := versionsOf(ctx, t, admin, manifest)
		again, _, err := Grant(ctx, cluster.Config, manifest, Options{Duration: time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(versionsOf(ctx, t, admin, manifest)).To(Equal(before), "resourceVersions of the manifest's objects")
		g.Expect(again).NotTo(Equal(kubeconfig))
		review := &authenticationv1.SelfSubjectReview{}
		g.Expect(newTestClient(t, parse(t, again)).Create(ctx, review)).To(Succeed())
		g.Expect(review.Status.UserInfo.Username).To(Equal(Username(sa)))
	})

	t.Run("a server given is the one the kubeconfig names", func(t *testing.T) {
		g := NewWithT(t)
		other, _, err := Grant(ctx, cluster.Config, manifest, Options{Server: "https://target.internal:6443"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(parse(t, other).Host).To(Equal("https://target.internal:6443"))
	})

	t.Run("the target ServiceAccount may do what a move does with a Cluster API kind", func(t *testing.T) {
		g := NewWithT(t)
		installMachineCRD(ctx, t, admin)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "moved"}}
		g.Expect(asTarget.Create(ctx, ns)).To(Succeed(), "Copying creates a namespace the target lacks")
		m := &unstructured.Unstructured{}
		m.SetGroupVersionKind(machineGVK)
		m.SetNamespace("moved")
		m.SetName("m1")
		m.SetFinalizers([]string{"test.move.cluster.x-k8s.io/hold"})
		// The mapper of a new client may not know the kind for a moment.
		g.Eventually(func() error { return asTarget.Create(ctx, m.DeepCopy()) }).WithTimeout(30*time.Second).
			Should(Succeed(), "Copying creates the copies")
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(machineGVK.GroupVersion().WithKind("TestMachineList"))
		g.Expect(asTarget.List(ctx, list)).To(Succeed(), "Restoring lists Clusters to unpause, across namespaces")
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(machineGVK)
		g.Expect(asTarget.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(asTarget.Update(ctx, got, client.DryRunAll)).To(Succeed(), "RestoringTarget checks copies with a dry-run update")
		g.Expect(asTarget.Patch(ctx, got, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).
			To(Succeed(), "RollingBack drops finalizers")
		g.Expect(asTarget.Delete(ctx, got)).To(Succeed(), "RollingBack deletes the copies")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "moved", Name: "c1-kubeconfig"}}
		g.Expect(asTarget.Create(ctx, secret)).To(Succeed(), "Secrets move with their Clusters")
		g.Expect(asTarget.Delete(ctx, ns)).To(Succeed(), "RollingBack deletes the namespaces it created")
	})

	t.Run("the target ServiceAccount may not do what a move does not", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			do   func() error
		}{
			{"list nodes", func() error { return asTarget.List(ctx, &corev1.NodeList{}) }},
			{"create pods", func() error {
				return asTarget.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}})
			}},
			{"bind itself to a ClusterRole", func() error {
				return asTarget.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}})
			}},
			{"change its own ClusterRole", func() error {
				return asTarget.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "move-operator-target-base"}})
			}},
			{"delete a CRD", func() error {
				return asTarget.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "testmachines.infrastructure.cluster.x-k8s.io"}})
			}},
			{"update a namespace", func() error {
				return asTarget.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
					client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`)))
			}},
			{"delete a Deployment", func() error {
				return asTarget.DeleteAllOf(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}}, client.InNamespace("kube-system"))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.do()
				NewWithT(t).Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			})
		}
	})

	t.Run("a ClusterRole labelled aggregate-to-manager adds a provider's kinds", func(t *testing.T) {
		g := NewWithT(t)
		listHosts := authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "list", Group: "metal3.io", Resource: "baremetalhosts"}}
		g.Expect(allowed(ctx, t, asTarget, listHosts)).To(BeFalse(), "before the labelled ClusterRole")
		metal3 := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "move-operator-metal3", Labels: map[string]string{"move.cluster.x-k8s.io/aggregate-to-manager": "true"}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts", "baremetalhosts/status"},
				Verbs: []string{"list", "get", "create", "patch", "update", "delete"}}},
		}
		g.Expect(admin.Create(ctx, metal3)).To(Succeed())
		t.Cleanup(func() { _ = admin.Delete(context.Background(), metal3) })
		g.Eventually(func() bool { return allowed(ctx, t, asTarget, listHosts) }).WithTimeout(30*time.Second).
			Should(BeTrue(), "the aggregation controller gives move-operator-target the labelled role's rules")
		role := &rbacv1.ClusterRole{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: "move-operator-target"}, role)).To(Succeed())
		g.Expect(role.Rules).To(ContainElement(metal3.Rules[0]))
	})

	t.Run("a credential that may not create ClusterRoles is told to use an administrator's", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := Grant(ctx, parse(t, kubeconfig), manifest, Options{})
		g.Expect(err).To(MatchError(ContainSubstring("cluster administrator")))
	})

	t.Run("WriteSecret creates the Secret, then replaces only its kubeconfig", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}})).To(Succeed())
		key := client.ObjectKey{Namespace: "ops", Name: "target-kubeconfig"}
		g.Expect(WriteSecret(ctx, admin, key.Namespace, key.Name, "", []byte("first"))).To(Succeed())
		s := &corev1.Secret{}
		g.Expect(admin.Get(ctx, key, s)).To(Succeed())
		g.Expect(s.Data).To(Equal(map[string][]byte{"value": []byte("first")}))

		// A running move holds its Secret by a finalizer; other keys are the user's.
		s.Finalizers = []string{"move.cluster.x-k8s.io/in-use-test"}
		s.Data["note"] = []byte("kept")
		g.Expect(admin.Update(ctx, s)).To(Succeed())
		g.Expect(WriteSecret(ctx, admin, key.Namespace, key.Name, "", []byte("second"))).To(Succeed())
		g.Expect(admin.Get(ctx, key, s)).To(Succeed())
		g.Expect(s.Data).To(Equal(map[string][]byte{"value": []byte("second"), "note": []byte("kept")}))
		g.Expect(s.Finalizers).To(ConsistOf("move.cluster.x-k8s.io/in-use-test"))

		g.Expect(WriteSecret(ctx, admin, key.Namespace, key.Name, "kubeconfig", []byte("third"))).To(Succeed())
		g.Expect(admin.Get(ctx, key, s)).To(Succeed())
		g.Expect(s.Data).To(HaveKeyWithValue("kubeconfig", []byte("third")))
		s.Finalizers = nil
		g.Expect(admin.Update(ctx, s)).To(Succeed())
	})
}

func newTestClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parse reads a kubeconfig as the operator does, refusing what it refuses.
func parse(t *testing.T, kubeconfig []byte) *rest.Config {
	t.Helper()
	cfg, err := remote.ParseKubeconfig(kubeconfig, "Grant's result")
	if err != nil {
		raw, _ := clientcmd.Load(kubeconfig)
		server := ""
		if raw != nil {
			for _, c := range raw.Clusters {
				server = c.Server
			}
		}
		t.Fatalf("the operator refuses the kubeconfig for %s: %v", server, err)
	}
	return cfg
}

// versionsOf returns the resourceVersion of each object of the manifest.
func versionsOf(ctx context.Context, t *testing.T, c client.Client, manifest []byte) map[string]string {
	t.Helper()
	m, err := ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range m.Objects {
		got := &metav1.PartialObjectMetadata{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("reading %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out[o.GetKind()+" "+o.GetName()] = got.GetResourceVersion()
	}
	return out
}

func allowed(ctx context.Context, t *testing.T, c client.Client, spec authorizationv1.SelfSubjectAccessReviewSpec) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: spec}
	if err := c.Create(ctx, review); err != nil {
		t.Fatalf("SelfSubjectAccessReview: %v", err)
	}
	return review.Status.Allowed
}

// installMachineCRD installs a namespaced kind in a Cluster API group and
// waits until the API server serves it.
func installMachineCRD(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "testmachines." + machineGVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: machineGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "testmachines", Singular: "testmachine", Kind: machineGVK.Kind, ListKind: machineGVK.Kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: machineGVK.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}},
			}},
		},
	}
	if err := admin.Create(ctx, crd); err != nil {
		t.Fatalf("installing CRD %s: %v", crd.Name, err)
	}
	NewWithT(t).Eventually(func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	}).WithTimeout(30*time.Second).Should(BeTrue(), "CRD %s established", crd.Name)
}

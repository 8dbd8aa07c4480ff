//go:build cluster

package movetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/quiesce"
	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/snapshot"
	"github.com/move-operator/move-operator/test/testenv"
)

// ClusterState is what a move must leave as it found it in both clusters,
// apart from the objects it moves: the controllers' replica counts and
// annotations, and the webhook configurations byte for byte.
type ClusterState struct {
	Replicas map[string]int32
	Webhooks map[string]string
}

// StateOf is the ClusterState of both clusters.
func StateOf(ctx context.Context, g Gomega) ClusterState {
	return StateIn(ctx, g, Env.Source, Env.Target)
}

// StateIn is StateOf for some of the clusters.
func StateIn(ctx context.Context, g Gomega, clusters ...*testenv.Management) ClusterState {
	st := ClusterState{Replicas: map[string]int32{}, Webhooks: map[string]string{}}
	for _, m := range clusters {
		deployments := &appsv1.DeploymentList{}
		g.Expect(m.Client.List(ctx, deployments, client.HasLabels{capiprovider.ProviderLabel})).To(Succeed())
		for _, d := range deployments.Items {
			g.Expect(d.Annotations).NotTo(HaveKey(movev1alpha1.OriginalReplicasAnnotation), "%s: Deployment %s/%s", m.Name, d.Namespace, d.Name)
			st.Replicas[m.Name+" "+d.Namespace+"/"+d.Name] = ptr.Deref(d.Spec.Replicas, 1)
		}
		v := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		g.Expect(m.Client.List(ctx, v)).To(Succeed())
		for _, w := range v.Items {
			b, _ := json.Marshal([]any{w.Annotations, w.Labels, w.Webhooks})
			st.Webhooks[m.Name+" validating "+w.Name] = string(b)
		}
		mu := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		g.Expect(m.Client.List(ctx, mu)).To(Succeed())
		for _, w := range mu.Items {
			b, _ := json.Marshal([]any{w.Annotations, w.Labels, w.Webhooks})
			st.Webhooks[m.Name+" mutating "+w.Name] = string(b)
		}
	}
	return st
}

// SetProviderReplicas scales a provider's Deployment in one cluster and waits
// until it is Available; the test's cleanup puts it back to 1.
func SetProviderReplicas(t *testing.T, m *testenv.Management, provider string, n int32) {
	t.Helper()
	p := m.CAPI.Provider(provider)
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment}
	scale := func(n int32) error {
		d := &appsv1.Deployment{}
		if err := m.Client.Get(context.Background(), key, d); err != nil {
			return err
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(n)
		return m.Client.Patch(context.Background(), d, patch)
	}
	if err := scale(n); err != nil {
		t.Fatalf("scaling %s in %s: %v", key, m.Name, err)
	}
	t.Cleanup(func() { _ = scale(1) })
	NewWithT(t).Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(m.Client.Get(context.Background(), key, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(Equal(n))
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "%s in %s must reach %d available replicas", key, m.Name, n)
}

// CreateFleet creates a fleet in the source and removes it from both
// clusters when the test ends.
func CreateFleet(t *testing.T, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := fleet.Create(ctx, Env.Source.Client, opts)
	if err != nil {
		t.Fatalf("creating the fleet: %v", err)
	}
	t.Cleanup(func() {
		// Providers first: a test that failed half-way may have left them
		// at zero, and their webhooks would refuse the purge.
		resetProviders(t)
		purgeFleet(t, f)
	})
	return f
}

// resetProviders puts every provider back as installed (one replica, no
// record, no webhook bypass), so that a test that failed half-way does not
// fail the next ones too.
func resetProviders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range []*testenv.Management{Env.Source, Env.Target} {
		if err := quiesce.RemoveBypass(ctx, m.Client); err != nil {
			t.Errorf("removing a webhook bypass left in %s: %v", m.Name, err)
		}
		deployments := &appsv1.DeploymentList{}
		if err := m.Client.List(ctx, deployments, client.HasLabels{capiprovider.ProviderLabel}); err != nil {
			t.Errorf("listing providers of %s: %v", m.Name, err)
			continue
		}
		for i := range deployments.Items {
			d := &deployments.Items[i]
			_, recorded := d.Annotations[movev1alpha1.OriginalReplicasAnnotation]
			if !recorded && ptr.Deref(d.Spec.Replicas, 1) == 1 {
				continue
			}
			patch := client.MergeFrom(d.DeepCopy())
			delete(d.Annotations, movev1alpha1.OriginalReplicasAnnotation)
			d.Spec.Replicas = ptr.To[int32](1)
			if err := m.Client.Patch(ctx, d, patch); err != nil {
				t.Errorf("resetting %s/%s in %s: %v", d.Namespace, d.Name, m.Name, err)
			}
		}
	}
}

// purgeFleet removes every object of the fleet from both clusters, finalizers
// first (no provider controller runs to remove them), then the namespaces.
func purgeFleet(t *testing.T, f *fleet.Fleet) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, m := range []*testenv.Management{Env.Target, Env.Source} {
		// Providers put back by resetProviders serve their webhooks again
		// only once their pods run: until then, try again (their pods
		// start within a second or two: look often).
		var err error
		for err = purge(ctx, m.Client, f.Namespaces, f.Identities...); err != nil && ctx.Err() == nil; err = purge(ctx, m.Client, f.Namespaces, f.Identities...) {
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("removing the fleet from %s: %v", m.Name, err)
		}
	}
}

func capiTypes(ctx context.Context, c client.Client) ([]schema.GroupVersionKind, map[schema.GroupVersionKind]bool, error) {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{snapshot.ClusterctlLabel}); err != nil {
		return nil, nil, err
	}
	var gvks []schema.GroupVersionKind
	namespaced := map[schema.GroupVersionKind]bool{}
	for _, crd := range crds.Items {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				gvks = append(gvks, gvk)
				namespaced[gvk] = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
			}
		}
	}
	gvks = append(gvks, corev1.SchemeGroupVersion.WithKind("Secret"), corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	namespaced[gvks[len(gvks)-2]], namespaced[gvks[len(gvks)-1]] = true, true
	return gvks, namespaced, nil
}

// purge deletes every Cluster API object (and Secret and ConfigMap) of the
// namespaces, the global objects named global, and the namespaces, dropping
// finalizers first. Clusters go first: webhooks refuse to delete a
// ClusterClass still in use.
func purge(ctx context.Context, c client.Client, namespaces []string, global ...string) error {
	gvks, namespaced, err := capiTypes(ctx, c)
	if err != nil {
		return err
	}
	sort.SliceStable(gvks, func(i, j int) bool { return gvks[i].Kind == "Cluster" && gvks[j].Kind != "Cluster" })
	var errs []string
	for _, gvk := range gvks {
		var targets []string
		if namespaced[gvk] {
			targets = namespaces
		} else {
			targets = []string{""}
		}
		for _, ns := range targets {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			opts := []client.ListOption{}
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			if err := c.List(ctx, list, opts...); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			for i := range list.Items {
				u := &list.Items[i]
				if ns == "" && !contains(global, u.GetName()) {
					continue
				}
				if len(u.GetFinalizers()) > 0 {
					patch := client.MergeFrom(u.DeepCopy())
					u.SetFinalizers(nil)
					if err := c.Patch(ctx, u, patch); err != nil && !apierrors.IsNotFound(err) {
						errs = append(errs, err.Error())
					}
				}
				if err := c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	for _, ns := range namespaces {
		if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// AssertOwnersExist checks that every ownerReference of every object in the
// namespaces points at an object that exists, with that UID, in the same
// cluster.
func AssertOwnersExist(ctx context.Context, g Gomega, c client.Client, namespaces []string) {
	uids := map[types.UID]string{}
	var owned []unstructured.Unstructured
	g.Expect(ForEachObject(ctx, c, namespaces, func(u unstructured.Unstructured) {
		uids[u.GetUID()] = u.GetKind() + " " + u.GetName()
		if len(u.GetOwnerReferences()) > 0 {
			owned = append(owned, u)
		}
	})).To(Succeed())
	g.Expect(owned).NotTo(BeEmpty())
	for _, u := range owned {
		for _, ref := range u.GetOwnerReferences() {
			g.Expect(uids).To(HaveKey(ref.UID), "%s %s/%s is owned by %s %s with UID %s, which does not exist in this cluster",
				u.GetKind(), u.GetNamespace(), u.GetName(), ref.Kind, ref.Name, ref.UID)
		}
	}
}

// ForEachObject calls fn with every Cluster API object, Secret and ConfigMap
// of the namespaces, and every global Cluster API object, of a cluster.
func ForEachObject(ctx context.Context, c client.Client, namespaces []string, fn func(unstructured.Unstructured), opts ...client.ListOption) error {
	gvks, namespaced, err := capiTypes(ctx, c)
	if err != nil {
		return err
	}
	for _, gvk := range gvks {
		targets := []string{""}
		if namespaced[gvk] {
			targets = namespaces
		}
		for _, ns := range targets {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, append([]client.ListOption{client.InNamespace(ns)}, opts...)...); err != nil {
				return err
			}
			for _, u := range list.Items {
				fn(u)
			}
		}
	}
	return nil
}

// PausedByUserLabel marks, in tests, the Clusters and ClusterClasses that a
// test paused as their user would (pauseAsUser): a move leaves them paused.
const PausedByUserLabel = "test.move.cluster.x-k8s.io/paused-by-user"

// AssertNoMoveMarks checks that no Cluster or ClusterClass in the namespaces
// is paused but those their user paused.
func AssertNoMoveMarks(ctx context.Context, g Gomega, c client.Client, namespaces []string) {
	g.Expect(ForEachObject(ctx, c, namespaces, func(u unstructured.Unstructured) {
		if u.GetKind() != "Cluster" && u.GetKind() != "ClusterClass" {
			return
		}
		g.Expect(u.GetAnnotations()).NotTo(HaveKey(movev1alpha1.PausedByAnnotation))
		if _, user := u.GetLabels()[PausedByUserLabel]; user {
			return
		}
		paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
		g.Expect(paused).To(BeFalse(), "%s %s/%s is still paused", u.GetKind(), u.GetNamespace(), u.GetName())
		g.Expect(u.GetAnnotations()).NotTo(HaveKey("cluster.x-k8s.io/paused"), "%s %s/%s is still paused", u.GetKind(), u.GetNamespace(), u.GetName())
	})).To(Succeed())
}

// Take snapshots the namespaces of one cluster, leaving out what a move may
// change: the pause and provenance annotations.
func Take(ctx context.Context, g Gomega, m *testenv.Management, namespaces []string) *snapshot.Snapshot {
	s, err := snapshot.Take(ctx, m.Client, snapshot.Options{
		Namespaces:        namespaces,
		IgnoreAnnotations: []string{movev1alpha1.PausedByAnnotation, movev1alpha1.CopiedToAnnotation},
	})
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

// InNamespaces returns the objects of a snapshot that live in one of the
// namespaces (a snapshot also holds global objects and their hierarchies).
func InNamespaces(s *snapshot.Snapshot, namespaces ...string) *snapshot.Snapshot {
	out := &snapshot.Snapshot{}
	for _, o := range s.Objects {
		if contains(namespaces, o.Namespace) {
			out.Objects = append(out.Objects, o)
		}
	}
	return out
}

// ScaleUps records, from the operator's writes, the order in which
// Deployments went from zero replicas back up.
type ScaleUps struct {
	mu    sync.Mutex
	last  map[string]int32
	order []string
}

func (s *ScaleUps) Observe(cluster, _ string, obj client.Object) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]int32{}
	}
	key := cluster + " " + d.Namespace + "/" + d.Name
	n := ptr.Deref(d.Spec.Replicas, 1)
	if prev, seen := s.last[key]; seen && prev == 0 && n > 0 {
		s.order = append(s.order, cluster)
	}
	s.last[key] = n
}

func (s *ScaleUps) Clusters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// ResourceVersions maps every Cluster API object, Secret and ConfigMap of the
// namespaces, every provider Deployment and every webhook configuration of a
// cluster to its resourceVersion: equal maps mean nothing was written.
func ResourceVersions(ctx context.Context, g Gomega, m *testenv.Management, namespaces []string) map[string]string {
	out := map[string]string{}
	gvks, namespaced, err := capiTypes(ctx, m.Client)
	g.Expect(err).NotTo(HaveOccurred())
	gvks = append(gvks,
		appsv1.SchemeGroupVersion.WithKind("Deployment"),
		admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
		admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"))
	namespaced[gvks[len(gvks)-3]] = false // every namespace: the providers' own
	for _, gvk := range gvks {
		targets := []string{""}
		if namespaced[gvk] {
			targets = namespaces
		}
		for _, ns := range targets {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			g.Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, o := range list.Items {
				out[gvk.Kind+" "+o.Namespace+"/"+o.Name] = o.ResourceVersion
			}
		}
	}
	return out
}

// WarningNotes returns the notes of the Warning events about mo with the
// given reason.
func WarningNotes(ctx context.Context, g Gomega, mo *movev1alpha1.MoveOperation, reason string) []string {
	events := &eventsv1.EventList{}
	g.Expect(Client.List(ctx, events, client.InNamespace(mo.Namespace))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Name == mo.Name && e.Type == "Warning" && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// LoseFleet removes every object of the fleet from the source, and its
// namespaces, as a management cluster that was lost no longer holds them,
// and waits until the namespaces are gone, so that a restore can create
// them again.
func LoseFleet(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Env.Source.Client
	var err error
	for err = purge(ctx, c, f.Namespaces, f.Identities...); err != nil && ctx.Err() == nil; err = purge(ctx, c, f.Namespaces, f.Identities...) {
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("removing the fleet from the source: %v", err)
	}
	// The credentials of the fleet's identities live in the providers'
	// namespaces: a lost cluster lost them too (the garbage collector
	// would, at its own pace).
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets); err != nil {
		t.Fatal(err)
	}
	for i := range secrets.Items {
		for _, ref := range secrets.Items[i].OwnerReferences {
			if contains(f.Identities, ref.Name) {
				if err := c.Delete(ctx, &secrets.Items[i]); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	for _, ns := range f.Namespaces {
		for {
			err := c.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("namespace %s is still there: %v", ns, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

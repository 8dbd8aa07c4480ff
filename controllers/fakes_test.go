package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/creator"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/remote"
)

// The clusters of the decision tests (decisions_test.go): a source and a
// target management cluster held by controller-runtime's fake client, with
// as much of an API server and of the Deployment controller as the steps of
// Copying and RollingBack read: CRDs labelled for clusterctl, a kube-system
// namespace whose UID names the cluster, one provider controller stopped by
// the move, and answers to "who am I". Cluster API objects are read and
// written as unstructured objects, as the move does. No process is started:
// a whole table runs in milliseconds.

const (
	// fleetNamespace holds the workload cluster the move takes.
	fleetNamespace = "fleet"
	// operationNamespace holds the MoveOperation, its target Secret and the
	// record of its plan.
	operationNamespace = "ops"
	// operatorUsername is who the operator is in both clusters.
	operatorUsername = "system:serviceaccount:move-operator-system:move-operator-controller-manager"
	// theCreator created the MoveOperation, and is asked about in
	// SubjectAccessReviews.
	theCreator = "alice"
	// somebodyElse is the field manager of what the move did not write.
	somebodyElse = "kubectl-client-side-apply"
)

var (
	clusterGVK    = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	machineSetGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"}
	machineGVK    = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	crdGVK        = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

	// providerKey is the provider controller the move stopped in both
	// clusters.
	providerKey = types.NamespacedName{Namespace: "capi-system", Name: "capi-controller-manager"}
)

// fakeScheme knows the built-in kinds and MoveOperation, as the
// operator's does. It names the kinds of typed objects; no fake client
// gets it, as a fake client adds to its scheme the kinds it meets.
var fakeScheme = newFakeScheme()

// newFakeScheme returns the scheme of one fake cluster: fakeScheme's kinds,
// and the Cluster API kinds and CRDs as unstructured objects. Registered
// so, the fake client answers a list of them as whole objects and as
// metadata alike, as an API server does; met first in a metadata list, it
// would store them as metadata only.
func newFakeScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(movev1alpha1.AddToScheme(s))
	for _, gvk := range []schema.GroupVersionKind{clusterGVK, machineSetGVK, machineGVK, crdGVK} {
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		s.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	return s
}

// fakeCluster is one management cluster on a fake client. Every write that
// stores something is written to the journal the two clusters share, in
// the order made, so that a test can tell what happened in which cluster
// first.
type fakeCluster struct {
	// Client is what the operator uses; raw, the same cluster without
	// the journal and the refusals, is what the tests set up and look
	// at.
	client.Client
	raw     client.Client
	role    movev1alpha1.ClusterRole
	journal *journal

	mu sync.Mutex
	// refuse, when set, is asked before each request whether the cluster
	// refuses it, and with what error.
	refuse func(fakeRequest) error
	// created counts the objects created, for their UIDs.
	created int
	// stalledRollouts keeps the Deployment controller from making a scaled
	// Deployment Available (its pods do not come up).
	stalledRollouts bool
}

// fakeRequest is one request to a fake cluster, as the journal and refuse
// see it: "patch Deployment capi-system/capi-controller-manager".
type fakeRequest struct {
	verb string
	kind string
	key  string
}

func (r fakeRequest) String() string { return r.verb + " " + r.kind + " " + r.key }

// newFakeCluster returns a cluster holding objs besides what every
// management cluster of the tests holds: its kube-system namespace (with
// id as UID), the CRDs of the moved kinds, and the provider controller at
// zero replicas, its original count recorded by the move.
func newFakeCluster(t *testing.T, role movev1alpha1.ClusterRole, id types.UID, j *journal, objs ...client.Object) *fakeCluster {
	t.Helper()
	f := &fakeCluster{role: role, journal: j}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: id}},
		stoppedProvider(),
		clusterctlCRD(clusterGVK, "clusters"), clusterctlCRD(machineSetGVK, "machinesets"), clusterctlCRD(machineGVK, "machines"),
	)
	for _, o := range objs {
		// Every object an API server holds has a UID; the move's listings
		// tell objects apart by it.
		if o.GetUID() == "" {
			o.SetUID(types.UID(fmt.Sprintf("uid-%s-%s-%s", strings.ToLower(kindOfObject(o)), o.GetNamespace(), o.GetName())))
		}
	}
	raw := fake.NewClientBuilder().WithScheme(newFakeScheme()).WithObjects(objs...).
		WithStatusSubresource(&appsv1.Deployment{}, &movev1alpha1.BackupSchedule{}).
		// The move knows its own copies by their field manager.
		WithReturnManagedFields().
		Build()
	f.raw, f.Client = raw, interceptor.NewClient(raw, f.interceptor())
	return f
}

// refuseWith makes the cluster refuse the requests refuse returns an error
// for; nil accepts every request again.
func (f *fakeCluster) refuseWith(refuse func(fakeRequest) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = refuse
}

func (f *fakeCluster) refused(r fakeRequest) error {
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse == nil {
		return nil
	}
	return refuse(r)
}

// interceptor makes the fake client answer as the cluster does: it
// refuses what refuse says, answers who the operator is, gives what is
// created a UID and its field manager, journals every write, and rolls
// out a Deployment once it is scaled.
func (f *fakeCluster) interceptor() interceptor.Funcs {
	write := func(ctx context.Context, c client.WithWatch, verb string, obj client.Object, dryRun bool, do func() error) error {
		r := requestOf(verb, obj)
		if err := f.refused(r); err != nil {
			return err
		}
		if err := do(); err != nil {
			return err
		}
		if dryRun {
			return nil // stores nothing: not a write
		}
		f.journal.add(f.role, r)
		if d, ok := obj.(*appsv1.Deployment); ok && !strings.Contains(verb, "/") {
			if err := f.rollOut(ctx, c, client.ObjectKeyFromObject(d)); err != nil {
				return err
			}
			// The fake's Deployment controller is done before the write
			// is answered, so the answer shows the rollout.
			return c.Get(ctx, client.ObjectKeyFromObject(d), d)
		}
		return nil
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := f.refused(fakeRequest{verb: "get", kind: kindOfObject(obj), key: key.String()}); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := f.refused(fakeRequest{verb: "list", kind: strings.TrimSuffix(kindOfObject(list), "List")}); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if review, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				// Answers for the user it asks about, and stores nothing.
				review.Status.Allowed = f.refused(reviewRequest(review)) == nil
				return nil
			}
			if review, ok := obj.(*authenticationv1.SelfSubjectReview); ok {
				// Asks who the operator is, and stores nothing.
				review.Status.UserInfo.Username = operatorUsername
				return nil
			}
			o := (&client.CreateOptions{}).ApplyOptions(opts)
			f.assignIdentity(obj, o.FieldManager)
			return write(ctx, c, "create", obj, len(o.DryRun) > 0, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			dryRun := len((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) > 0
			return write(ctx, c, "update", obj, dryRun, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			dryRun := len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0
			return write(ctx, c, "patch", obj, dryRun, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			dryRun := len((&client.DeleteOptions{}).ApplyOptions(opts).DryRun) > 0
			return write(ctx, c, "delete", obj, dryRun, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return write(ctx, nil, "patch/"+sub, obj, false, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return write(ctx, nil, "update/"+sub, obj, false, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
	}
}

// assignIdentity gives an object being created what an API server gives
// it and the fake client does not: a UID, and, for an unstructured object
// (the fake tracks the field managers of typed ones), an entry of the
// field manager that creates it.
func (f *fakeCluster) assignIdentity(obj client.Object, fieldManager string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if obj.GetUID() == "" {
		f.created++
		obj.SetUID(types.UID(fmt.Sprintf("%s-uid-%d", strings.ToLower(string(f.role)), f.created)))
	}
	if _, ok := obj.(*unstructured.Unstructured); ok && fieldManager != "" && len(obj.GetManagedFields()) == 0 {
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{{
			Manager: fieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: obj.GetObjectKind().GroupVersionKind().GroupVersion().String(),
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`),
		}})
	}
}

// rollOut does what the Deployment controller and the kubelet would do
// once a Deployment is scaled: its pods come up, Available, at the count
// asked for; unless the rollouts of the cluster are stalled.
func (f *fakeCluster) rollOut(ctx context.Context, c client.Client, key client.ObjectKey) error {
	f.mu.Lock()
	stalled := f.stalledRollouts
	f.mu.Unlock()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, key, d); err != nil {
		return fmt.Errorf("the fake Deployment controller reading %s: %w", key, err)
	}
	n := ptr.Deref(d.Spec.Replicas, 1)
	available := n
	if stalled {
		available = 0
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           n, UpdatedReplicas: n, ReadyReplicas: available, AvailableReplicas: available,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: deploymentCondition(available == n), Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := c.Status().Update(ctx, d); err != nil {
		return fmt.Errorf("the fake Deployment controller rolling out %s: %w", key, err)
	}
	return nil
}

func deploymentCondition(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// stallRollouts keeps the Deployments scaled from now on from becoming
// Available.
func (f *fakeCluster) stallRollouts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalledRollouts = true
}

// finishRollouts lets the pods of the cluster's Deployments come up again,
// and the provider's.
func (f *fakeCluster) finishRollouts(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	f.stalledRollouts = false
	f.mu.Unlock()
	if err := f.rollOut(context.Background(), f.raw, providerKey); err != nil {
		t.Fatal(err)
	}
}

// has reports whether the cluster holds an object of the kind and name.
func (f *fakeCluster) has(t *testing.T, gvk schema.GroupVersionKind, namespace, name string) bool {
	t.Helper()
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err := f.raw.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if err != nil && client.IgnoreNotFound(err) != nil {
		t.Fatalf("reading %s %s/%s in the %s: %v", gvk.Kind, namespace, name, f.role, err)
	}
	return err == nil
}

// replicas returns the provider controller's replica count.
func (f *fakeCluster) replicas(t *testing.T) int32 {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := f.raw.Get(context.Background(), providerKey, d); err != nil {
		t.Fatalf("reading the provider Deployment in the %s: %v", f.role, err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

// holds reports which of refs the cluster holds.
func (f *fakeCluster) holds(t *testing.T, refs ...objectRef) []string {
	t.Helper()
	var out []string
	for _, r := range refs {
		if f.has(t, r.gvk, r.namespace, r.name) {
			out = append(out, r.String())
		}
	}
	return out
}

func refStrings(refs ...objectRef) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.String())
	}
	return out
}

// paused reports whether the cluster's Cluster c1 is paused, by the move or
// anyone.
func (f *fakeCluster) paused(t *testing.T) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	if err := f.raw.Get(context.Background(), client.ObjectKey{Namespace: fleetNamespace, Name: "c1"}, u); err != nil {
		t.Fatalf("reading Cluster fleet/c1 in the %s: %v", f.role, err)
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	_, pausedByMove := u.GetAnnotations()[movev1alpha1.PausedByAnnotation]
	return paused || pausedByMove
}

func requestOf(verb string, obj client.Object) fakeRequest {
	return fakeRequest{verb: verb, kind: kindOfObject(obj), key: client.ObjectKeyFromObject(obj).String()}
}

// reviewRequest is the request a SubjectAccessReview asks about, for
// refuseWith: verb "review", kind the resource, key "user namespace".
func reviewRequest(r *authorizationv1.SubjectAccessReview) fakeRequest {
	a := r.Spec.ResourceAttributes
	return fakeRequest{verb: "review " + a.Verb, kind: a.Resource, key: r.Spec.User + " " + a.Namespace}
}

// kindOfObject names an object's kind, whether it carries it (unstructured and
// metadata-only objects) or its Go type does.
func kindOfObject(obj runtime.Object) string {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk.Kind
	}
	gvk, err := apiutil.GVKForObject(obj, fakeScheme)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

// journal is what the operator wrote to both clusters, in order:
// "source patch Deployment capi-system/capi-controller-manager".
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(role movev1alpha1.ClusterRole, r fakeRequest) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, strings.ToLower(string(role))+" "+r.String())
}

// index returns the position of the first entry that starts with prefix
// (from the first one on, or from the last one on when last is set), or -1.
func (j *journal) index(prefix string, last bool) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	found := -1
	for i, e := range j.entries {
		if strings.HasPrefix(e, prefix) {
			found = i
			if !last {
				break
			}
		}
	}
	return found
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return "\t" + strings.Join(j.entries, "\n\t")
}

// written reports whether the journal holds a write of ref in the cluster
// of role ("source", "target").
func (j *journal) written(role string, ref objectRef) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.entries {
		if strings.HasPrefix(e, role+" ") && strings.HasSuffix(e, " "+ref.gvk.Kind+" "+ref.namespace+"/"+ref.name) {
			return true
		}
	}
	return false
}

func (j *journal) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = nil
}

// expectBefore checks that every entry starting with first comes before
// every entry starting with then, and that there are both.
func (j *journal) expectBefore(t *testing.T, first, then, why string) {
	t.Helper()
	last, next := j.index(first, true), j.index(then, false)
	if last == -1 || next == -1 || last > next {
		t.Errorf("%s: want every %q before every %q in the journal:\n%s", why, first, then, j)
	}
}

// stoppedProvider is the provider controller as ScalingDown leaves it: at
// zero, its original replica count recorded on it.
func stoppedProvider() *appsv1.Deployment {
	labels := map[string]string{movev1alpha1.DefaultControllerLabel: "cluster-api", "control-plane": "controller-manager"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: providerKey.Namespace, Name: providerKey.Name, Labels: labels, Generation: 2,
			Annotations: map[string]string{movev1alpha1.OriginalReplicasAnnotation: "1"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2},
	}
}

// clusterctlCRD is the CRD of a Cluster API kind, labelled as clusterctl
// installs it, so that the move considers its objects.
func clusterctlCRD(gvk schema.GroupVersionKind, plural string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":   plural + "." + gvk.Group,
			"labels": map[string]any{graph.ClusterctlLabel: "", "cluster.x-k8s.io/provider": "cluster-api"},
		},
		"spec": map[string]any{
			"group": gvk.Group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": gvk.Kind, "plural": plural},
			"versions": []any{
				map[string]any{"name": gvk.Version, "served": true, "storage": true},
			},
		},
	}}
}

// capiObject returns a Cluster API object of the fleet namespace, with a
// UID that names it, written by somebody else than the move, and owned by
// owners (the first one its controller).
func capiObject(gvk schema.GroupVersionKind, name string, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(fleetNamespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + strings.ToLower(gvk.Kind) + "-" + name))
	u.SetManagedFields(writtenBySomebodyElse(gvk))
	for i, o := range owners {
		u.SetOwnerReferences(append(u.GetOwnerReferences(), metav1.OwnerReference{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(),
			Controller: ptr.To(i == 0), BlockOwnerDeletion: ptr.To(i == 0),
		}))
	}
	return u
}

// writtenBySomebodyElse are the managed fields of an object the move did
// not write.
func writtenBySomebodyElse(gvk schema.GroupVersionKind) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager: somebodyElse, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: gvk.GroupVersion().String(),
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`),
	}}
}

// workloadCluster returns what the source holds of one workload cluster,
// c1, as ScalingDown leaves it: paused by the move, a MachineSet and its
// Machine, and the cluster's kubeconfig Secret. The plan copies it in
// three groups: the Cluster; the MachineSet and the Secret; the Machine.
func workloadCluster(operation types.UID) []client.Object {
	cluster := capiObject(clusterGVK, "c1")
	cluster.SetAnnotations(map[string]string{movev1alpha1.PausedByAnnotation: string(operation)})
	utilruntime.Must(unstructured.SetNestedField(cluster.Object, true, "spec", "paused"))
	machineSet := capiObject(machineSetGVK, "c1-md", cluster)
	machine := capiObject(machineGVK, "c1-md-0", machineSet)
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: fleetNamespace, Name: "c1-kubeconfig", UID: "uid-secret-c1-kubeconfig",
		Labels:          map[string]string{"cluster.x-k8s.io/cluster-name": "c1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterGVK.GroupVersion().String(), Kind: clusterGVK.Kind, Name: "c1", UID: cluster.GetUID()}},
		ManagedFields:   writtenBySomebodyElse(corev1.SchemeGroupVersion.WithKind("Secret")),
	}}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}},
		cluster, machineSet, machine, kubeconfig,
	}
}

// kubeconfigOfTarget is a self-contained kubeconfig of the target, with
// token as its credential. Its server is never dialled: remote.Clients
// builds a client of it, which Wrap puts aside for the fake target.
func kubeconfigOfTarget(token string) []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: target
  cluster:
    server: https://target.invalid:6443
users:
- name: mover
  user:
    token: ` + token + `
contexts:
- name: target
  context: {cluster: target, user: mover}
current-context: target
`)
}

// targetSecretName is the Secret in operationNamespace of the source
// that holds the target's kubeconfig.
const targetSecretName = "target-kubeconfig"

// moveFixture is a move in Copying between a fake source and target, and
// the reconciler that drives it.
type moveFixture struct {
	t              *testing.T
	source, target *fakeCluster
	journal        *journal
	mo             *movev1alpha1.MoveOperation
	r              *MoveOperationReconciler
}

// newMoveFixture returns a move that has just entered Copying, its
// controllers stopped in both clusters, the workload cluster c1 in the
// source, and targetObjs in the target.
func newMoveFixture(t *testing.T, targetObjs ...client.Object) *moveFixture {
	t.Helper()
	j := &journal{}
	mo := moveIn(pathTo(movev1alpha1.PhaseCopying)...)
	mo.UID = "op-1"
	mo.CreationTimestamp = mo.Status.PhaseTransitions[0].Time
	mo.Spec = movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: targetSecretName}},
		Namespaces: []string{fleetNamespace},
	}
	for _, role := range []movev1alpha1.ClusterRole{movev1alpha1.ClusterSource, movev1alpha1.ClusterTarget} {
		mo.Status.Controllers = append(mo.Status.Controllers, movev1alpha1.RecordedController{
			Cluster: role, Namespace: providerKey.Namespace, Name: providerKey.Name, OriginalReplicas: 1,
		})
	}
	mo.Annotations = map[string]string{movev1alpha1.CreatedByAnnotation: theCreator}
	// The admission policy that wrote the creator, there before the
	// MoveOperation.
	policy, binding := creator.Policy()
	// Named as the installer names them.
	policy.Name, binding.Name, binding.Spec.PolicyName = creator.PolicyName, creator.PolicyName, creator.PolicyName
	policy.CreationTimestamp = metav1.NewTime(mo.CreationTimestamp.Add(-time.Hour))
	binding.CreationTimestamp = policy.CreationTimestamp
	sourceObjs := append(workloadCluster(mo.UID), policy, binding,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operationNamespace}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: operationNamespace, Name: targetSecretName},
			Data:       map[string][]byte{"value": kubeconfigOfTarget("first-token")},
		})
	f := &moveFixture{
		t:       t,
		source:  newFakeCluster(t, movev1alpha1.ClusterSource, "source-cluster", j, sourceObjs...),
		target:  newFakeCluster(t, movev1alpha1.ClusterTarget, "target-cluster", j, targetObjs...),
		journal: j,
		mo:      mo,
	}
	f.r = f.newReconciler()
	return f
}

// newReconciler returns a reconciler of the fixture's clusters with
// nothing in memory: a restarted operator.
func (f *moveFixture) newReconciler() *MoveOperationReconciler {
	return &MoveOperationReconciler{
		Source:    f.source,
		APIReader: f.source,
		Targets: &remote.Clients{Reader: f.source, Scheme: fakeScheme,
			// The client of the Secret's kubeconfig is put aside: its
			// requests go to the fake target.
			Wrap: func(client.Client) client.Client { return f.target }},
		PollInterval: time.Millisecond,
	}
}

// restartOperator replaces the reconciler with one that remembers nothing,
// as a restarted operator.
func (f *moveFixture) restartOperator() { f.r = f.newReconciler() }

// reconcile runs one reconcile of a phase's step (its preamble and its
// sub-steps), on the MoveOperation as the last reconcile left it, as the
// driver does: an error that outlasts the bound of the phase's row
// (errorBound) is the row's failure.
func (f *moveFixture) reconcile(spec phaseSpec) (outcome, error) {
	s := newScope(f.mo)
	o, err := f.r.runPhase(context.Background(), s, spec)
	if err != nil {
		if failed, outlasted := specOf(phaseOf(f.mo)).outlasted(f.r, s, err); outlasted {
			return failed, nil
		}
	}
	return o, err
}

// copyGroups reconciles Copying until status.progress says n groups are
// copied, failing the test on anything but progress.
func (f *moveFixture) copyGroups(n int32) {
	f.t.Helper()
	for range 10 * (n + 1) {
		if p := f.mo.Status.Progress; p != nil && p.CopiedGroups >= n && !f.r.memoOf(f.mo.UID).copyStarted.IsZero() {
			return
		}
		o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
		if err != nil || o.kind != outcomeProgress {
			f.t.Fatalf("copying %d groups: got %+v, %v; want progress", n, o, err)
		}
	}
	f.t.Fatalf("copying %d groups: progress %+v after as many reconciles", n, f.mo.Status.Progress)
}

// elapse lets d pass for the move without waiting: every time it recorded
// (when its phases began, when Copying last copied further, when this run
// began Copying and last copied a group) moves d into the past, as if the
// reconciles since had come d later.
func (f *moveFixture) elapse(d time.Duration) {
	mo := f.mo
	back := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			t.Time = t.Add(-d)
		}
	}
	back(&mo.CreationTimestamp)
	for i := range mo.Status.PhaseTransitions {
		back(&mo.Status.PhaseTransitions[i].Time)
	}
	if p := mo.Status.Progress; p != nil {
		back(p.LastProgressTime)
	}
	mem := f.r.memoOf(mo.UID)
	for _, t := range []*time.Time{&mem.copyStarted, &mem.lastCopied} {
		if !t.IsZero() {
			*t = t.Add(-d)
		}
	}
}

// enteredCopying makes the move have entered Copying ago, the phases
// before it a second apart before that.
func (f *moveFixture) enteredCopying(ago time.Duration) {
	ts := f.mo.Status.PhaseTransitions
	at := time.Now().Add(-ago)
	for i := len(ts) - 1; i >= 0; i-- {
		ts[i].Time = metav1.NewTime(at)
		at = at.Add(-time.Second)
	}
	f.mo.CreationTimestamp = metav1.NewTime(at)
}

// putTarget creates obj in the target as somebody else than the move.
func (f *moveFixture) putTarget(obj client.Object) {
	f.t.Helper()
	if err := f.target.raw.Create(context.Background(), obj, client.FieldOwner(somebodyElse)); err != nil {
		f.t.Fatalf("creating %s %s in the target: %v", kindOfObject(obj), client.ObjectKeyFromObject(obj), err)
	}
}

// reconcileAndApply reconciles Copying once, expecting a failure, and
// applies it as reconcilePhase does.
func (f *moveFixture) reconcileAndApply() {
	f.t.Helper()
	o, err := f.reconcile(specOf(movev1alpha1.PhaseCopying))
	if err != nil || o.kind != outcomeFail {
		f.t.Fatalf("Copying reported %+v, %v; want a failure", o, err)
	}
	if _, err := newScope(f.mo).apply(specOf(movev1alpha1.PhaseCopying), o); err != nil {
		f.t.Fatal(err)
	}
}

// deleteSource deletes an object from the source, as a writer the move
// does not stop would.
func (f *moveFixture) deleteSource(ref objectRef) {
	f.t.Helper()
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.gvk)
	obj.SetNamespace(ref.namespace)
	obj.SetName(ref.name)
	if err := f.source.raw.Delete(context.Background(), obj); err != nil {
		f.t.Fatalf("deleting %s from the source: %v", ref, err)
	}
}

// createSource creates an object in the source, as a writer the move does
// not stop would.
func (f *moveFixture) createSource(obj client.Object) {
	f.t.Helper()
	if err := f.source.raw.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("creating %s %s in the source: %v", kindOfObject(obj), client.ObjectKeyFromObject(obj), err)
	}
}

// rotateTargetCredential puts a kubeconfig with another token in the
// target Secret, as whatever refreshes the credential would.
func (f *moveFixture) rotateTargetCredential() {
	f.t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: operationNamespace, Name: targetSecretName}
	ctx := context.Background()
	if err := f.source.raw.Get(ctx, key, s); err != nil {
		f.t.Fatal(err)
	}
	s.Data["value"] = kubeconfigOfTarget("second-token")
	if err := f.source.raw.Update(ctx, s); err != nil {
		f.t.Fatalf("rotating the target credential: %v", err)
	}
}

// objectRef names an object of a fake cluster.
type objectRef struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func (o objectRef) String() string { return fmt.Sprintf("%s %s/%s", o.gvk.Kind, o.namespace, o.name) }

var (
	theCluster    = objectRef{clusterGVK, fleetNamespace, "c1"}
	theMachineSet = objectRef{machineSetGVK, fleetNamespace, "c1-md"}
	theSecret     = objectRef{corev1.SchemeGroupVersion.WithKind("Secret"), fleetNamespace, "c1-kubeconfig"}
	theMachine    = objectRef{machineGVK, fleetNamespace, "c1-md-0"}
	theNamespace  = objectRef{corev1.SchemeGroupVersion.WithKind("Namespace"), "", fleetNamespace}
	// The plan copies the Cluster first, then the MachineSet and the
	// Secret, then the Machine.
	copiedByGroup = [][]objectRef{{theCluster}, {theMachineSet, theSecret}, {theMachine}}
)

// somebodysMachine is a Machine of the moved name that the move did not
// make: created in the target by somebody else.
func somebodysMachine() *unstructured.Unstructured {
	u := capiObject(machineGVK, theMachine.name)
	u.SetUID("uid-somebodys-machine")
	return u
}

package quiesce

import (
	"context"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/look"
)

// counted counts the requests a fake cluster serves, by verb and kind.
type counted struct {
	mu sync.Mutex
	n  map[string]int
	// conflicts is how many Deployment patches to refuse with a conflict.
	conflicts int
}

func (c *counted) add(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[what]++
}

func (c *counted) get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[what]
}

func (c *counted) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

func kindOf(o any) string {
	switch o.(type) {
	case *appsv1.Deployment, *appsv1.DeploymentList:
		return "deployments"
	case *corev1.Service:
		return "services"
	case *admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfigurationList:
		return "validatingwebhookconfigurations"
	case *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfigurationList:
		return "mutatingwebhookconfigurations"
	}
	return "other"
}

func countingCluster(count *counted, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&appsv1.Deployment{}).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			count.add("get " + kindOf(obj))
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			count.add("list " + kindOf(list))
			return c.List(ctx, list, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count.add("update " + kindOf(obj))
			count.mu.Lock()
			refuse := count.conflicts > 0
			count.conflicts--
			count.mu.Unlock()
			if refuse {
				return apierrors.NewConflict(schema.GroupResource{Resource: kindOf(obj)}, obj.GetName(), nil)
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count.add("patch " + kindOf(obj))
			count.mu.Lock()
			refuse := count.conflicts > 0
			count.conflicts--
			count.mu.Unlock()
			if refuse {
				return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
}

func provider(namespace, name string, replicas int32, labelled bool) *appsv1.Deployment {
	d := rolledOut(replicas)
	d.Namespace, d.Name = namespace, name
	if labelled {
		d.Labels = map[string]string{"cluster.x-k8s.io/provider": name}
	}
	return d
}

var providerSelector = labels.SelectorFromSet(nil).Add(func() labels.Requirement {
	r, _ := labels.NewRequirement("cluster.x-k8s.io/provider", "exists", nil)
	return *r
}())

func TestOneLookReadsTheControllersWithOneList(t *testing.T) {
	ctx := context.Background()
	count := &counted{}
	c := countingCluster(count,
		provider("capi-system", "capi-controller-manager", 0, true),
		provider("capl-system", "capl-controller-manager", 0, true),
		provider("capi-operator-system", "capi-operator-controller-manager", 0, false))
	controllers := []Controller{
		{Key: types.NamespacedName{Namespace: "capi-system", Name: "capi-controller-manager"}},
		{Key: types.NamespacedName{Namespace: "capl-system", Name: "capl-controller-manager"}},
		{Key: types.NamespacedName{Namespace: "capi-operator-system", Name: "capi-operator-controller-manager"}, Manager: true},
		{Key: types.NamespacedName{Namespace: "gone", Name: "deleted-during-the-move"}},
	}

	t.Run("a check that the stopped controllers stay stopped lists once, and reads only what the list lacks", func(t *testing.T) {
		count.reset()
		found, err := Restarted(ctx, look.New(c, providerSelector), controllers)
		if err != nil || len(found) != 0 {
			t.Fatalf("Restarted: %v, %v; want nothing running", found, err)
		}
		// The unlabelled manager and the Deployment that is gone are read
		// on their own, once each; the two providers come from the list.
		if got := count.get("list deployments"); got != 1 {
			t.Errorf("%d lists of Deployments, want 1", got)
		}
		if got := count.get("get deployments"); got != 2 {
			t.Errorf("%d reads of Deployments, want 2 (the manager the selector does not match, the one gone)", got)
		}
	})

	t.Run("a restart is judged by the answer to the patch that scaled, without reading again", func(t *testing.T) {
		count.reset()
		lk := look.New(c, providerSelector)
		recorded := []Controller{{Key: controllers[0].Key, Recorded: ptr.To[int32](1)}, {Key: controllers[1].Key, Recorded: ptr.To[int32](1)}}
		_, waiting, err := RestoreAndCheck(ctx, lk, recorded, 1)
		if err != nil || len(waiting) != 2 {
			t.Fatalf("RestoreAndCheck: waiting %v, %v; want both scaled and not yet Available", waiting, err)
		}
		if err := Forget(ctx, lk, recorded); err != nil {
			t.Fatal(err)
		}
		if l, g, p := count.get("list deployments"), count.get("get deployments"), count.get("patch deployments"); l != 1 || g != 0 || p != 2 {
			t.Errorf("%d lists, %d reads, %d patches of Deployments; want 1, 0, 2", l, g, p)
		}
		d := &appsv1.Deployment{}
		if err := lk.Get(ctx, controllers[0].Key, d); err != nil || ptr.Deref(d.Spec.Replicas, 0) != 1 {
			t.Errorf("the lk answers %v replicas (%v), want the 1 the patch set", d.Spec.Replicas, err)
		}
	})

	t.Run("a write refused with a conflict is read again from the server", func(t *testing.T) {
		count.reset()
		annotated := provider("capi-system", "capi-controller-manager", 1, true)
		c := countingCluster(count, annotated)
		count.conflicts = 1
		recorded, err := Record(ctx, look.New(c, providerSelector), controllers[:1])
		if err != nil || ptr.Deref(recorded[0].Recorded, -1) != 1 {
			t.Fatalf("Record: %+v, %v; want 1 recorded after the conflict", recorded, err)
		}
		if l, g, p := count.get("list deployments"), count.get("get deployments"), count.get("patch deployments"); l != 1 || g != 1 || p != 2 {
			t.Errorf("%d lists, %d reads, %d patches; want 1 list, 1 read after the conflict, 2 patches", l, g, p)
		}
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, controllers[0].Key, d); err != nil || d.Annotations[movev1alpha1.OriginalReplicasAnnotation] != "1" {
			t.Errorf("annotations %v (%v), want the recorded 1", d.Annotations, err)
		}
	})
}

func TestOneLookKeepsTheListOfControllersItWasGiven(t *testing.T) {
	ctx := context.Background()
	count := &counted{}
	c := countingCluster(count, provider("capi-system", "capi-controller-manager", 1, true))
	lk := look.New(c, providerSelector)
	selected, err := SelectControllers(ctx, lk, providerSelector)
	if err != nil || len(selected) != 1 {
		t.Fatalf("SelectControllers: %v, %v", selected, err)
	}
	if _, err := Record(ctx, lk, selected); err != nil {
		t.Fatal(err)
	}
	if l, g := count.get("list deployments"), count.get("get deployments"); l != 1 || g != 0 {
		t.Errorf("%d lists and %d reads of Deployments, want the selection's list alone", l, g)
	}
	// A list of something else (one namespace) is not the look's list.
	count.reset()
	other := look.New(c, providerSelector)
	if err := other.List(ctx, &appsv1.DeploymentList{}, client.InNamespace("capi-system")); err != nil {
		t.Fatal(err)
	}
	if err := other.Get(ctx, selected[0].Key, &appsv1.Deployment{}); err != nil {
		t.Fatal(err)
	}
	if got := count.get("list deployments"); got != 2 {
		t.Errorf("%d lists, want 2: a namespace's list is no list of every controller", got)
	}
}

// servedWebhooks returns a provider's Deployment, its webhook Service and
// a validating and a mutating configuration whose webhooks it serves.
func servedWebhooks(namespace, name string) []client.Object {
	d := provider(namespace, name, 1, true)
	d.Spec.Template.Labels = map[string]string{"control-plane": name}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-webhook-service"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"control-plane": name}},
	}
	config := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: svc.Name}}
	v := validating(name)
	v.Webhooks = []admissionregistrationv1.ValidatingWebhook{{Name: "v." + name, ClientConfig: config}}
	m := mutating()
	m.Name = name
	m.Webhooks = []admissionregistrationv1.MutatingWebhook{{Name: "m." + name, ClientConfig: config}}
	return []client.Object{d, svc, v, m}
}

func TestOneLookListsTheWebhookConfigurationsOnceAndWritesTheBypassOnWhatItListed(t *testing.T) {
	ctx := context.Background()
	count := &counted{}
	objs := append(servedWebhooks("capi-system", "capi-controller-manager"), servedWebhooks("capl-system", "capl-controller-manager")...)
	c := countingCluster(count, objs...)
	lk := look.New(c, providerSelector)
	controllers, err := SelectControllers(ctx, lk, providerSelector)
	if err != nil {
		t.Fatal(err)
	}
	// The managers' webhooks and the controllers' are found in one look,
	// as webhooksOf does, and the bypass is installed through it.
	if _, err := FindCAPIOperator(ctx, lk); err != nil {
		t.Fatal(err)
	}
	wh, err := FindWebhooks(ctx, lk, controllers)
	if err != nil || len(wh.Served) != 4 {
		t.Fatalf("FindWebhooks: %+v, %v; want the 4 webhooks of the two providers", wh, err)
	}
	count.conflicts = 1 // the first configuration written changed since the list
	written, err := InstallBypass(ctx, lk, wh.Served, "system:serviceaccount:move-operator-system:mover")
	if err != nil || len(written) != 4 {
		t.Fatalf("InstallBypass wrote %v, %v; want the 4 configurations", written, err)
	}
	want := map[string]int{
		"list deployments":                     2, // the selection's, and cluster-api-operator's label
		"list validatingwebhookconfigurations": 1, "list mutatingwebhookconfigurations": 1,
		"get services": 2,
		// 4 updates and one more after the conflict (the mutating
		// configurations go first); after it the look's list of that
		// kind is stale, so both of its configurations are read from
		// the server.
		"update validatingwebhookconfigurations": 2, "update mutatingwebhookconfigurations": 3,
		"get mutatingwebhookconfigurations": 2, "list other": 0,
	}
	for what, n := range want {
		if got := count.get(what); got != n {
			t.Errorf("%s: %d, want %d", what, got, n)
		}
	}
	if got := count.get("get validatingwebhookconfigurations"); got != 0 {
		t.Errorf("%d reads of validating configurations, want none: they come from the list", got)
	}

	// A second look at it sees the bypass the first wrote.
	still, err := BypassInstalled(ctx, look.New(c, providerSelector))
	if err != nil || len(still) != 4 {
		t.Errorf("BypassInstalled: %v, %v; want the 4 configurations written", still, err)
	}
}

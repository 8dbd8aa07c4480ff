//go:build cluster

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
)

// throughStatusUpdate are the fields Cluster API's webhook cannot take from
// a status written at v1beta1 once the object exists: for a status update
// the API server keeps the old object's metadata, converted to v1beta1 with
// Cluster API's conversion-data annotation, and the conversion back restores
// these fields from it ("the only client writing the Phase field should be
// the Machine controller"). The operator writes status at the storage
// version, where no conversion runs, so these arrive as Convert makes them.
var throughStatusUpdate = map[string][]string{
	"Machine": {"status.phase"},
}

// serverSet is the metadata the API server gives an object, which no
// conversion decides.
var serverSet = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}

// TestConvertAsClusterAPIsWebhook writes every fixture at v1beta1 through the
// API server, status included, as a client of the older contract would: the
// real conversion webhook converts it, and the API server stores it at
// v1beta2. Read back at v1beta2, it is what convert.Convert makes of the same
// v1beta1 object in process, but for what only the API server sets.
//
// The admission webhooks run too, on the converted object: the fixtures are
// as the older release's defaulting left them, which is what a move copies,
// so any difference would be a default the newer release adds, worth
// knowing as well.
func TestConvertAsClusterAPIsWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, c)

	// The API server's UIDs of the objects, by the fixtures' ones, for the
	// owner references of what comes after.
	uids := map[types.UID]types.UID{}
	for _, fixture := range converttest.Objects(ns) {
		parent := t
		t.Run(fmt.Sprintf("a %s %s %s stored by Cluster API's webhook is what the operator converts", fixture.GroupVersionKind().Version, fixture.GetKind(), fixture.GetName()), func(t *testing.T) {
			sent := asWritten(fixture, uids)
			created := create(ctx, t, c, sent)
			uids[fixture.GetUID()] = created.GetUID()
			// When the whole test ends, the last created first: an owner
			// deleted earlier would have the garbage collector delete
			// what the next subtests read.
			parent.Cleanup(func() { release(parent, c, created) })
			if _, ok := sent.Object["status"]; ok {
				// Our own v1beta1 object, not the one the create returned:
				// that one carries the conversion-data annotation, from
				// which Cluster API's conversion restores what v1beta2
				// had, over what we write.
				withStatus := sent.DeepCopy()
				withStatus.SetResourceVersion(created.GetResourceVersion())
				withStatus.SetUID(created.GetUID())
				if err := c.Status().Update(ctx, withStatus); err != nil {
					t.Fatalf("writing the status of %s %s at %s: %v", sent.GetKind(), sent.GetName(), sent.GetAPIVersion(), err)
				}
			}

			want, err := convert.Convert(ctx, sent, "v1beta2", nil)
			if err != nil {
				t.Fatalf("converting in process: %v", err)
			}
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(want.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(sent), stored); err != nil {
				t.Fatalf("reading %s %s at v1beta2: %v", sent.GetKind(), sent.GetName(), err)
			}
			for _, o := range []*unstructured.Unstructured{want, stored} {
				for _, field := range serverSet {
					unstructured.RemoveNestedField(o.Object, "metadata", field)
				}
				for _, path := range throughStatusUpdate[o.GetKind()] {
					unstructured.RemoveNestedField(o.Object, strings.Split(path, ".")...)
				}
			}
			if diff := cmp.Diff(want.Object, stored.Object); diff != "" {
				t.Errorf("the API server stored another v1beta2 object than the operator's conversion makes (-operator +API server):\n%s", diff)
			}
		})
	}
}

// create creates o, again while an admission webhook answers that it could
// not read what it checks against: the in-process webhooks share two cores
// with the API server and every other test binary, and their reads of a
// ClusterClass, say, may miss the API server's deadline.
func create(ctx context.Context, t *testing.T, c client.Client, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	var created *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		created = o.DeepCopy()
		err := c.Create(ctx, created)
		if apierrors.IsInternalError(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Internal error") {
			t.Logf("creating %s %s, again: %v", o.GetKind(), o.GetName(), err)
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("creating %s %s at %s: %v", o.GetKind(), o.GetName(), o.GetAPIVersion(), err)
	}
	return created
}

// asWritten is a fixture as a client writes it: without what the API server
// sets, its owner references naming the owners the API server created.
func asWritten(fixture *unstructured.Unstructured, uids map[types.UID]types.UID) *unstructured.Unstructured {
	o := fixture.DeepCopy()
	for _, field := range serverSet {
		unstructured.RemoveNestedField(o.Object, "metadata", field)
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		if uid, ok := uids[refs[i].UID]; ok {
			refs[i].UID = uid
		}
	}
	o.SetOwnerReferences(refs)
	return o
}

// release takes the finalizers off an object (no controller runs here to
// take them off) and deletes it, so that its namespace can go. The
// admission webhooks check the patch, so it is retried as create retries.
func release(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Patch(ctx, o.DeepCopy(), patch)
		if apierrors.IsInternalError(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Internal error") {
			return false, nil
		}
		return true, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("removing the finalizers of %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	if err := c.Delete(ctx, o.DeepCopy()); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// namespace creates a namespace for one test and deletes it when the test
// ends.
func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "convert-" + rand.String(5)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

//go:build cluster

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The engine logs through the context's logger; these tests read its
	// results, not its logs.
	log.SetLogger(logr.Discard())
	testenv.Main(m, testenv.Options{CAPI: true}, &env)
}

// clients returns one client per cluster, as the operator holds them: not
// cached, reading and writing unstructured and metadata-only objects.
func clients(t *testing.T) (source, target client.Client) {
	t.Helper()
	var err error
	if source, err = client.New(env.Source.Config, client.Options{}); err != nil {
		t.Fatalf("creating the source client: %v", err)
	}
	if target, err = client.New(env.Target.Config, client.Options{}); err != nil {
		t.Fatalf("creating the target client: %v", err)
	}
	return source, target
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace in the source for one test, and removes it
// from both clusters when the test ends (a copy may have created it in the
// target).
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := testenv.NewNamespace(t, env.Source, prefix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := env.Target.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s in the target: %v", ns, err)
		}
	})
	return ns
}

// plan discovers the source in the given namespaces and plans the move.
func plan(t *testing.T, ctx context.Context, c client.Client, namespaces []string, sel graph.Selection) *graph.Plan {
	t.Helper()
	types, err := graph.DiscoverTypes(ctx, c)
	if err != nil {
		t.Fatalf("DiscoverTypes: %v", err)
	}
	g, err := graph.Discover(ctx, c, types, graph.DiscoverOptions{Namespaces: namespaces})
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return g.Plan(sel)
}

func configMap(namespace, name string, labelsAndAnnotations ...map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(namespace)
	u.SetName(name)
	u.Object["data"] = map[string]any{"key": name}
	if len(labelsAndAnnotations) > 0 {
		u.SetLabels(labelsAndAnnotations[0])
	}
	if len(labelsAndAnnotations) > 1 {
		u.SetAnnotations(labelsAndAnnotations[1])
	}
	return u
}

func create(t *testing.T, ctx context.Context, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s/%s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

func get(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	return u, err
}

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	clusterGVK   = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	forceMove    = map[string]string{graph.MoveLabel: ""}
)

// copyAll copies every group of the plan.
func copyAll(t *testing.T, ctx context.Context, c *move.Copier, p *graph.Plan) error {
	t.Helper()
	for i := range p.Groups {
		if _, err := c.CopyGroup(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func errorContains(err error, words string) bool {
	return err != nil && strings.Contains(err.Error(), words)
}

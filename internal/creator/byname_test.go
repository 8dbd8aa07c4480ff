package creator

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
)

// A right refused for a whole namespace is asked again for the plan's
// objects it stood for, by name, unless they are too many to ask one by
// one.
func TestARefusedNamespaceWideRightIsAskedAgainByNameForThePlansObjects(t *testing.T) {
	secret := graph.Type{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true}
	var objects []*graph.Object
	add := func(ns, name string, del bool) {
		objects = append(objects, &graph.Object{ObjectRef: graph.ObjectRef{GVK: secret.GVK, Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}, Delete: del})
	}
	add("capl-system", "identity-credentials", false)
	for i := range maxAskedByName + 1 {
		add("crowded", fmt.Sprintf("s-%d", i), true)
	}
	plan := graph.NewPlan([][]*graph.Object{objects})
	ts := graph.NewTypes(secret)
	refused := []right{{verb: "get", resource: "secrets"}, {verb: "delete", resource: "secrets"}}

	named, tooMany, err := byName(plan, ts, append(
		[]access.Need{refused[0].need("capl-system", "")},
		refused[0].need("crowded", ""), refused[1].need("crowded", "")))
	if err != nil {
		t.Fatal(err)
	}
	if len(named) != 1 || named[0].Name != "identity-credentials" || named[0].Namespace != "capl-system" || named[0].Verb != "get" {
		t.Errorf("asked by name %+v, want get of the credentials Secret alone", named)
	}
	if len(tooMany) != 2 {
		t.Errorf("left as refused %+v, want the two rights of the crowded namespace, too many objects to ask one by one", tooMany)
	}
}

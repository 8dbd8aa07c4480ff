package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/listing"
	"github.com/move-operator/move-operator/internal/move"
)

// What a move back into an older Cluster API may lose, and what it refuses.
//
// The older release's controllers act on the older version's fields alone:
// whatever a v1beta2 object says that v1beta1 has no place for
// (convert.Lost) would, after the move, be said to nobody. A move back
// therefore refuses every object whose spec or metadata hold such a field,
// by kind, object and field, before anything is stopped, and again once
// the controllers are stopped (nothing may have set one since): the user
// clears those fields in the source, or moves into a Cluster API at least
// as new as the source's.
//
// A status is another matter: the controllers of the older release
// recompute the statuses of Cluster API's kinds from what they observe, and
// a carried status is only what they start from. Status fields the older
// version cannot hold (a Machine's status.failureDomain, say) are dropped,
// and the plan's warnings list them; they refuse nothing.

// LostFields are the fields of one object that the version the target
// stores its kind at cannot hold.
type LostFields struct {
	Object graph.ObjectRef
	// Version is the target's version of the kind.
	Version string
	// Fields are the paths ("spec.minReadySeconds"), sorted; or none when
	// Problem says why the object cannot be converted at all.
	Fields  []string
	Problem string
}

func (l LostFields) String() string {
	what := strings.Join(firstOf(l.Fields, maxFieldsNamed, "fields"), ", ")
	if l.Problem != "" {
		what = l.Problem
	}
	return fmt.Sprintf("%s (%s cannot hold %s)", l.Object, l.Version, what)
}

// GoingBack is what converting a plan's objects back to the older versions
// the target stores their kinds at would lose.
type GoingBack struct {
	// Refused are the objects whose spec or metadata hold fields the older
	// version cannot hold, or that cannot be converted at all: the move
	// cannot take them.
	Refused []LostFields
	// Dropped are the objects whose carried status holds fields the older
	// version cannot hold: they move without them.
	Dropped []LostFields
}

const (
	// maxObjectsNamed bounds the objects a message names; it says how many
	// more there are.
	maxObjectsNamed = 10
	// maxFieldsNamed bounds the fields a message names per object.
	maxFieldsNamed = 10
	// listPageSize is how many objects one list request of the check reads.
	listPageSize = 500
)

// CheckGoingBack reads from source every object of the plan whose kind the
// target stores at an older version than the source (a move back:
// ConversionToOlder), and says which of them hold fields that version
// cannot hold: those Cluster API's conversion back keeps only in its
// annotation (convert.Lost), and those the target's CRD of that version
// does not have, which its API server would drop (an older release's CRD
// lacks fields Cluster API added to v1beta1 since; see TargetSchemas).
// carriesStatus says whether the move writes the objects' statuses to the
// copies; when it does not, what a status loses does not matter. It writes
// nothing.
func CheckGoingBack(ctx context.Context, source, target client.Reader, plan *graph.Plan, carriesStatus bool) (GoingBack, error) {
	var out GoingBack
	if plan == nil {
		return out, nil
	}
	wanted, places := goingBackPlaces(plan)
	if len(places) == 0 {
		return out, nil
	}
	schemas, err := TargetSchemas(ctx, target)
	if err != nil {
		return out, err
	}
	for _, p := range places {
		to := plan.TargetGVK(p.GVK).Version
		prune := schemas.pruneAt(plan.TargetGVK(p.GVK))
		var opts []client.ListOption
		if p.Namespace != "" {
			opts = append(opts, client.InNamespace(p.Namespace))
		}
		r := listing.Request{List: source.List, PageSize: listPageSize, Options: opts, NewList: func() client.ObjectList {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(p.GVK.GroupVersion().WithKind(p.GVK.Kind + "List"))
			return list
		}}
		err := listing.Each(ctx, r, func(item client.Object) error {
			o, ok := wanted[p][item.GetUID()]
			obj, isUnstructured := item.(*unstructured.Unstructured)
			if !ok || !isUnstructured {
				return nil
			}
			obj.SetGroupVersionKind(p.GVK)
			refused, dropped := lostGoingBack(ctx, o, obj, to, prune, carriesStatus)
			if refused != nil {
				out.Refused = append(out.Refused, *refused)
			}
			if dropped != nil {
				out.Dropped = append(out.Dropped, *dropped)
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("reading the %s objects of namespace %q to convert back to %s: %w", graph.KindString(p.GVK.GroupKind()), p.Namespace, to, err)
		}
	}
	byRef := func(a, b LostFields) int { return strings.Compare(a.Object.String(), b.Object.String()) }
	slices.SortFunc(out.Refused, byRef)
	slices.SortFunc(out.Dropped, byRef)
	return out, nil
}

// goingBackPlaces returns the plan's objects that go back to an older
// version and are not in the target already, by where they are listed, and
// those places in the plan's order.
func goingBackPlaces(plan *graph.Plan) (map[move.KindNamespace]map[types.UID]*graph.Object, []move.KindNamespace) {
	var going []*graph.Object
	for _, o := range plan.Objects() {
		if goesBack(plan, o.GVK) && !o.FoundInTarget {
			going = append(going, o)
		}
	}
	return move.ByKindNamespace(going)
}

// lostGoingBack sorts what one object loses going back to version: what
// refuses it, and what of its status is dropped.
func lostGoingBack(ctx context.Context, o *graph.Object, obj *unstructured.Unstructured, to string, prune convert.Prune, carriesStatus bool) (refused, dropped *LostFields) {
	lost, err := convert.LostIn(ctx, obj, to, prune)
	if err != nil {
		return &LostFields{Object: o.ObjectRef, Version: to, Problem: err.Error()}, nil
	}
	var keep, status []string
	for _, path := range lost {
		if path == "metadata.annotations."+convert.DataAnnotation {
			// What an earlier conversion left: the copy goes without it
			// (see move's dropConversionData).
			continue
		}
		if path == "status" || strings.HasPrefix(path, "status.") {
			status = append(status, path)
			continue
		}
		keep = append(keep, path)
	}
	if len(keep) > 0 {
		refused = &LostFields{Object: o.ObjectRef, Version: to, Fields: keep}
	}
	if len(status) > 0 && carriesStatus {
		dropped = &LostFields{Object: o.ObjectRef, Version: to, Fields: status}
	}
	return refused, dropped
}

// Schemas are the structural schemas of the target's CRDs, by kind and
// version: what its API server keeps of an object written at that version.
type Schemas map[schema.GroupVersionKind]*structuralschema.Structural

var crdListGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"}

// TargetSchemas reads the schemas of the CRDs the target moves (labelled
// for clusterctl), every served version of each.
func TargetSchemas(ctx context.Context, target client.Reader) (Schemas, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(crdListGVK)
	if err := target.List(ctx, list, client.HasLabels{graph.ClusterctlLabel}); err != nil {
		return nil, fmt.Errorf("target cluster: reading the CRDs' schemas: %w", err)
	}
	out := Schemas{}
	for i := range list.Items {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, crd); err != nil {
			return nil, fmt.Errorf("target cluster: reading CRD %s: %w", list.Items[i].GetName(), err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("target cluster: reading the schema of CRD %s %s: %w", crd.Name, v.Name, err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("target cluster: the schema of CRD %s %s is not structural: %w", crd.Name, v.Name, err)
			}
			out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return out, nil
}

// pruneAt prunes an object of gvk as the target's API server does; nil
// when the target has no schema of it (nothing is known to be dropped).
func (s Schemas) pruneAt(gvk schema.GroupVersionKind) convert.Prune {
	structural, ok := s[gvk]
	if !ok {
		return nil
	}
	return func(older *unstructured.Unstructured) error {
		pruning.Prune(older.Object, structural, true)
		return nil
	}
}

// goesBack reports whether the plan writes objects read at gvk to the
// target at an older version.
func goesBack(plan *graph.Plan, gvk schema.GroupVersionKind) bool {
	to := plan.TargetGVK(gvk)
	return to != gvk && version.CompareKubeAwareVersionStrings(to.Version, gvk.Version) < 0
}

// RefusalMessage says which objects a move back cannot take and what to
// do; empty when it can take them all.
func (g GoingBack) RefusalMessage() string {
	if len(g.Refused) == 0 {
		return ""
	}
	return fmt.Sprintf("%d objects hold in their spec or metadata fields that the older version the target stores their kind at cannot hold, and the target's controllers would never see them: %s; "+
		"clear those fields in the source (or set them back to their defaults) and create a new MoveOperation, or move into a Cluster API at least as new as the source's",
		len(g.Refused), strings.Join(firstOf(g.Refused, maxObjectsNamed, "objects"), "; "))
}

// DroppedMessage says which status fields a move back drops; empty when
// it drops none.
func (g GoingBack) DroppedMessage() string {
	if len(g.Dropped) == 0 {
		return ""
	}
	return fmt.Sprintf("%d objects move back without status fields the older version the target stores their kind at cannot hold (its controllers recompute their statuses): %s",
		len(g.Dropped), strings.Join(firstOf(g.Dropped, maxObjectsNamed, "objects"), "; "))
}

// firstOf names the first n of items, and says how many more there are.
func firstOf[T any](items []T, n int, what string) []string {
	out := make([]string, 0, min(len(items), n+1))
	for i, item := range items {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more %s", len(items)-n, what))
			break
		}
		out = append(out, fmt.Sprint(item))
	}
	return out
}

// checkGoingBack refuses, before anything is stopped, a move back into an
// older Cluster API whose objects hold in their spec or metadata what the
// older version cannot hold, naming each kind, object and field; and notes
// the status fields it drops (see CheckGoingBack).
func checkGoingBack(ctx context.Context, e *Env) error {
	if e.Plan == nil || !e.targetReady() {
		return nil
	}
	back, err := CheckGoingBack(ctx, e.Source, e.Target.Client, e.Plan, e.Spec.CarriesStatus())
	if err != nil {
		return err
	}
	if msg := back.RefusalMessage(); msg != "" {
		e.find(movev1alpha1.ReasonFieldsNotInOlderVersion, msg)
	}
	if msg := back.DroppedMessage(); msg != "" {
		e.warn("", msg)
	}
	return nil
}

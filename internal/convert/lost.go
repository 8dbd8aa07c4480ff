package convert

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DataAnnotation is where Cluster API's conversion to an older version
// keeps the whole newer object (its spec and status, as JSON), so that its
// own conversion back restores what the older version has no field for.
// It is sigs.k8s.io/cluster-api/util/conversion.DataAnnotation, spelled out
// so that this package does not import a package built for tests.
const DataAnnotation = "cluster.x-k8s.io/conversion-data"

// Lost returns the fields of obj, an object at the version Cluster API's
// code converts through (v1beta2), that an older version cannot hold: the
// paths ("spec.minReadySeconds", "status.failureDomain") whose values do
// not come back as they were when obj is converted to that version and up
// again without DataAnnotation, whether gone or changed (where v1beta1
// holds one value for two of v1beta2's, going back sets both). None: the
// older version holds everything obj says.
//
// Why without the annotation: Cluster API's way back keeps what it cannot
// map in DataAnnotation, and only a newer Cluster API reads it. The
// controllers of the older release (the target of a move back) act on the
// older version's fields alone, so a value that lives only in the
// annotation is a value they never see: that is what cannot go back.
// A zero value and an absent one count as the same, because the older
// versions keep many booleans and numbers without pointers and cannot
// tell them apart; Cluster API restores that difference from the
// annotation for the same reason.
//
// The way up is not checked here: the hub holds every field of the older
// versions, but for the few Cluster API drops by its own choice (such as
// KubeadmConfig's spec.useExperimentalRetryJoin), as an upgrade in place
// drops them.
func Lost(ctx context.Context, obj *unstructured.Unstructured, version string) ([]string, error) {
	return LostIn(ctx, obj, version, nil)
}

// Prune removes from an object, at the older version a move back writes it
// at, what the cluster it goes to would not store: the fields its CRD's
// schema for that version does not have, which its API server drops
// without a word.
type Prune func(older *unstructured.Unstructured) error

// LostIn is Lost for a cluster whose CRD may not have every field of the
// older version's Go type in Cluster API's code (Cluster API adds fields
// to v1beta1 after the release that stores it: v1.10's MachineHealthCheck
// has no spec.unhealthyMachineConditions, v1.14's v1beta1 type does):
// prune, when not nil, drops from the object converted back what that
// cluster's schema does not hold, before it converts up again. The paths
// are still the newer version's.
func LostIn(ctx context.Context, obj *unstructured.Unstructured, version string, prune Prune) ([]string, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Version == version {
		return nil, nil
	}
	if _, hub := Versions(gvk.GroupKind()); hub != "" && hub != gvk.Version {
		return nil, fmt.Errorf("what cannot go back is checked from %s, the version Cluster API converts through: %s is at %s", hub, describe(obj), gvk.Version)
	}
	// The references' versions do not matter here: the way up keeps a
	// reference's group, kind and name, never its version.
	anyVersion := func(_ context.Context, gk schema.GroupKind) (string, error) {
		return schema.GroupVersion{Group: gk.Group, Version: version}.String(), nil
	}
	older, err := Convert(ctx, obj, version, anyVersion)
	if err != nil {
		return nil, err
	}
	annotations := older.GetAnnotations()
	delete(annotations, DataAnnotation)
	older.SetAnnotations(annotations)
	if prune != nil {
		if err := prune(older); err != nil {
			return nil, fmt.Errorf("pruning %s at %s as the cluster it goes to stores it: %w", describe(obj), version, err)
		}
	}
	back, err := Convert(ctx, older, gvk.Version, nil)
	if err != nil {
		return nil, fmt.Errorf("converting %s back to %s: %w", describe(obj), gvk.Version, err)
	}
	var lost []string
	diffPaths(obj.Object, back.Object, "", &lost)
	sort.Strings(lost)
	return lost, nil
}

// diffPaths appends the paths where a and b differ, zero values counting as
// absent.
func diffPaths(a, b any, path string, out *[]string) {
	if isZero(a) && isZero(b) {
		return
	}
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			diffPaths(am[k], bm[k], join(path, k), out)
		}
		return
	}
	al, aIsList := a.([]any)
	bl, bIsList := b.([]any)
	if aIsList && bIsList && len(al) == len(bl) {
		for i := range al {
			diffPaths(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// isZero reports whether v is absent or the zero value of its JSON type.
func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case int64:
		return v == 0
	case float64:
		return v == 0
	case map[string]any:
		for _, e := range v {
			if !isZero(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}

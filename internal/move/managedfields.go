package move

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Field paths of managed fields name an owner reference by its list-map key,
// the owner's UID: f:metadata → f:ownerReferences → k:{"uid":"<uid>"}.
const (
	metadataField        = "f:metadata"
	ownerReferencesField = "f:ownerReferences"
	listKeyPrefix        = "k:"
)

// rewriteOwnerUIDs returns a copy of a source object's managed fields fit
// for its copy in the target: every owner reference a field path names by
// its source UID is named by the owner's target UID instead, and the paths
// of owner references the copy does not have (owners that do not move) are
// dropped, so that no entry names a UID that does not exist in the target.
// Entries left with no field at all are dropped, as the API server drops
// them. target maps a source UID to the target UID of the same owner, and
// reports false for an owner that does not move.
//
// clusterctl restores managed fields with the source UIDs left in these
// paths: the owner reference they name is then a field nobody manages, and
// the next apply of such a manager can no longer remove it.
func rewriteOwnerUIDs(entries []metav1.ManagedFieldsEntry, target func(types.UID) (types.UID, bool, error)) ([]metav1.ManagedFieldsEntry, error) {
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if e.FieldsV1 == nil || len(e.FieldsV1.GetRawBytes()) == 0 {
			out = append(out, e)
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return nil, fmt.Errorf("reading the fields of manager %s: %w", e.Manager, err)
		}
		changed, err := rewriteOwnerKeys(fields, target)
		if err != nil {
			return nil, fmt.Errorf("rewriting the fields of manager %s: %w", e.Manager, err)
		}
		if !changed {
			out = append(out, e)
			continue
		}
		if len(fields) == 0 {
			continue
		}
		raw, err := json.Marshal(fields)
		if err != nil {
			return nil, fmt.Errorf("writing the fields of manager %s: %w", e.Manager, err)
		}
		e.FieldsV1 = metav1.NewFieldsV1(string(raw))
		out = append(out, e)
	}
	return out, nil
}

// rewriteOwnerKeys rewrites, in one entry's field set, the keys of the owner
// references, and reports whether it changed anything.
func rewriteOwnerKeys(fields map[string]any, target func(types.UID) (types.UID, bool, error)) (bool, error) {
	metadata, _ := fields[metadataField].(map[string]any)
	refs, _ := metadata[ownerReferencesField].(map[string]any)
	if len(refs) == 0 {
		return false, nil
	}
	rewritten := make(map[string]any, len(refs))
	changed := false
	for key, sub := range refs {
		uid, ok := ownerKeyUID(key)
		if !ok {
			rewritten[key] = sub
			continue
		}
		to, moves, err := target(uid)
		if err != nil {
			return false, err
		}
		changed = true
		if !moves {
			continue
		}
		rewritten[ownerKey(to)] = sub
	}
	if !changed {
		return false, nil
	}
	// Parents left without members are dropped: "." is what makes a
	// parent itself a managed field, and without it an empty parent means
	// nothing.
	switch {
	case len(rewritten) > 0:
		metadata[ownerReferencesField] = rewritten
	default:
		delete(metadata, ownerReferencesField)
		if len(metadata) == 0 {
			delete(fields, metadataField)
		}
	}
	return true, nil
}

// ownerKeyUID returns the UID a field path element names when it is the
// key of an owner reference, k:{"uid":"..."}.
func ownerKeyUID(key string) (types.UID, bool) {
	if !strings.HasPrefix(key, listKeyPrefix) {
		return "", false
	}
	var k map[string]any
	if err := json.Unmarshal([]byte(key[len(listKeyPrefix):]), &k); err != nil || len(k) != 1 {
		return "", false
	}
	uid, ok := k["uid"].(string)
	return types.UID(uid), ok
}

// ownerKey is the field path element of the owner reference with this UID,
// serialized as the API server serializes list-map keys (compact JSON).
func ownerKey(uid types.UID) string {
	k, _ := json.Marshal(map[string]string{"uid": string(uid)})
	return listKeyPrefix + string(k)
}

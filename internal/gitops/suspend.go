package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// record is what OriginalGitOpsSyncAnnotation holds: the sync setting a
// manager had before an operation suspended it.
type record struct {
	// Operation is the UID of the MoveOperation that suspended the manager.
	Operation string `json:"operation"`
	// Field is the path of the setting, for the reader of the annotation.
	Field string `json:"field"`
	// Value is what the field held; absent when the field was not set.
	Value json.RawMessage `json:"value,omitempty"`
}

func readRecord(u *unstructured.Unstructured) (record, bool) {
	raw, ok := u.GetAnnotations()[movev1alpha1.OriginalGitOpsSyncAnnotation]
	if !ok {
		return record{}, false
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		// Not ours to read (edited by hand): treated as another
		// operation's, so never restored from, and overwritten only if
		// the manager runs again.
		return record{Operation: "unreadable"}, true
	}
	return r, true
}

func recordOf(u *unstructured.Unstructured, k *kind, operation string) (string, error) {
	r := record{Operation: operation, Field: strings.Join(k.syncPath, ".")}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, k.syncPath...); found {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		r.Value = b
	}
	b, err := json.Marshal(r)
	return string(b), err
}

// Suspend stops the managers in the cluster, recording on each what it had
// before, and returns those this operation holds suspended. It is
// idempotent: a manager that already carries this operation's record is
// only checked (and suspended again if somebody resumed it meanwhile); one
// already suspended otherwise (by its user, or by an earlier move whose
// record it keeps) is left alone, and stays suspended after a rollback.
// Managers not found are skipped.
func Suspend(ctx context.Context, c client.Client, refs []Ref, operation string) ([]Ref, error) {
	versions := versionCache{}
	var held []Ref
	for _, ref := range refs {
		k := kindOf(ref.GroupKind)
		if k == nil || ref.Namespace == "" {
			continue
		}
		gvk, installed, err := versions.storageVersion(ctx, c, k)
		if err != nil {
			return held, err
		}
		if !installed {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return held, fmt.Errorf("reading %s: %w", ref, err)
		}
		rec, recorded := readRecord(u)
		ours := recorded && rec.Operation == operation
		if k.suspended(u) {
			if ours {
				held = append(held, ref)
			}
			continue
		}
		base := u.DeepCopy()
		if !ours {
			// Written in the same update as the suspension: a crash
			// leaves both or neither.
			value, err := recordOf(u, k, operation)
			if err != nil {
				return held, fmt.Errorf("recording the sync setting of %s: %w", ref, err)
			}
			annotations := u.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[movev1alpha1.OriginalGitOpsSyncAnnotation] = value
			u.SetAnnotations(annotations)
		}
		if err := k.suspend(u); err != nil {
			return held, fmt.Errorf("suspending %s: %w", ref, err)
		}
		if err := c.Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return held, fmt.Errorf("suspending %s: %w", ref, err)
		}
		held = append(held, ref)
	}
	return held, nil
}

// Restore gives every manager in the cluster that this operation suspended
// the sync setting it had before, and removes the record, in one update per
// manager. It finds them by their record, not from a list kept elsewhere, so
// that a restarted operator restores exactly what it suspended. It returns
// the managers restored.
func Restore(ctx context.Context, c client.Client, operation string) ([]Ref, error) {
	versions := versionCache{}
	var restored []Ref
	for _, k := range kinds {
		gvk, installed, err := versions.storageVersion(ctx, c, k)
		if err != nil {
			return restored, err
		}
		if !installed {
			continue
		}
		all, err := listAll(ctx, c, gvk)
		if err != nil {
			return restored, err
		}
		for _, u := range all {
			rec, recorded := readRecord(u)
			if !recorded || rec.Operation != operation {
				continue
			}
			ref := Ref{GroupKind: k.groupKind, Namespace: u.GetNamespace(), Name: u.GetName()}
			base := u.DeepCopy()
			if len(rec.Value) == 0 {
				unstructured.RemoveNestedField(u.Object, k.syncPath...)
			} else {
				var v any
				if err := json.Unmarshal(rec.Value, &v); err != nil {
					return restored, fmt.Errorf("reading the sync setting recorded on %s: %w", ref, err)
				}
				if err := unstructured.SetNestedField(u.Object, v, k.syncPath...); err != nil {
					return restored, fmt.Errorf("restoring the sync setting of %s: %w", ref, err)
				}
			}
			annotations := u.GetAnnotations()
			delete(annotations, movev1alpha1.OriginalGitOpsSyncAnnotation)
			u.SetAnnotations(annotations)
			if err := c.Patch(ctx, u, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return restored, fmt.Errorf("restoring the sync setting of %s: %w", ref, err)
			}
			restored = append(restored, ref)
		}
	}
	return restored, nil
}

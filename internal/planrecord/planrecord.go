// Package planrecord keeps the plan of a move in the source cluster, so that
// an operator restarted at any point of the move takes exactly the objects it
// planned, in the same order, without marking them one by one.
//
// The record is written once, before the first copy, in ConfigMaps of the
// MoveOperation's namespace owned by the MoveOperation (so that they go with
// it): the objects of each creation group with their identity (kind,
// namespace, name, UID) and what the move does with them. It holds no object
// content. A large plan is cut into several ConfigMaps; each names how many
// there are, so that a record cut short by a crash is known as incomplete
// and is written again (nothing has been copied before it is complete).
package planrecord

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/graph"
)

const (
	// chunkKey is the binaryData key of a record ConfigMap: gzipped JSON.
	chunkKey = "plan.json.gz"
	// partsAnnotation says how many ConfigMaps the record has.
	partsAnnotation = "move.cluster.x-k8s.io/plan-parts"
	// partAnnotation is the index of one ConfigMap in the record.
	partAnnotation = "move.cluster.x-k8s.io/plan-part"
)

// objectsPerPart bounds one ConfigMap's share of the record. An entry takes
// about 25 bytes once compressed (the UID, which does not compress, and
// names that share long prefixes), so a part stays far below the 1 MiB an
// object may have in etcd.
var objectsPerPart = 10000

// entry is one object of the plan, in short field names: the record of a
// thousand workload clusters holds tens of thousands of them.
type entry struct {
	Group     int       `json:"g"`
	Kind      int       `json:"k"` // index in part.Kinds
	Namespace string    `json:"n,omitempty"`
	Name      string    `json:"m"`
	UID       types.UID `json:"u"`
	// Flags: keep (not deleted from the source), global, in a global
	// hierarchy, found in the target.
	Flags      flags  `json:"f,omitempty"`
	KeepReason string `json:"r,omitempty"`
}

type flags uint8

const (
	flagKeep flags = 1 << iota
	flagGlobal
	flagInGlobalHierarchy
	flagFoundInTarget
)

type part struct {
	Kinds   []string `json:"kinds"` // "group/version/Kind"
	Objects []entry  `json:"objects"`
	// Namespaces are the namespaces the plan requires with nothing in them
	// to move (graph.Plan.RequireNamespaces), in the first part only.
	Namespaces []string `json:"namespaces,omitempty"`
	// TargetVersions are, by "group/Kind", the versions the target stores
	// the kinds at that it stores at another version than the objects'
	// (graph.Plan.SetTargetVersions), in the first part only. A record
	// written before they were recorded has none: every kind was stored at
	// one version in both clusters then.
	TargetVersions map[string]string `json:"targetVersions,omitempty"`
}

// Selector returns the labels that find the record of one MoveOperation.
func Selector(operation types.UID) client.MatchingLabels {
	return client.MatchingLabels{movev1alpha1.PlanOfLabel: string(operation)}
}

// Save writes the record of plan for the MoveOperation mo, replacing an
// incomplete one. Writing it again when it is complete changes nothing.
func Save(ctx context.Context, c client.Client, mo *movev1alpha1.MoveOperation, plan *graph.Plan) error {
	parts, err := encode(plan)
	if err != nil {
		return fmt.Errorf("recording the plan: %w", err)
	}
	existing, err := list(ctx, c, mo.Namespace, mo.UID)
	if err != nil {
		return err
	}
	if complete(existing) {
		return nil
	}
	// Parts of a record cut short by a crash: of an identical plan, or of
	// none (nothing was copied before the record was complete). Written
	// again, every one, with the count of this record.
	for i := range existing {
		if err := c.Delete(ctx, &existing[i], client.Preconditions{UID: &existing[i].UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting an incomplete record of the plan: %w", err)
		}
	}
	for i, data := range parts {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: mo.Namespace,
				Name:      fmt.Sprintf("moveoperation-%s-plan-%d", mo.UID, i),
				Labels:    map[string]string{movev1alpha1.PlanOfLabel: string(mo.UID)},
				Annotations: map[string]string{
					partAnnotation:  strconv.Itoa(i),
					partsAnnotation: strconv.Itoa(len(parts)),
				},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: movev1alpha1.GroupVersion.String(), Kind: "MoveOperation", Name: mo.Name, UID: mo.UID,
				}},
			},
			BinaryData: map[string][]byte{chunkKey: data},
		}
		if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("recording the plan in ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}

// Load reads the record of the MoveOperation's plan. It reports false when
// there is none, or only part of one.
func Load(ctx context.Context, c client.Reader, namespace string, operation types.UID) (*graph.Plan, bool, error) {
	existing, err := list(ctx, c, namespace, operation)
	if err != nil {
		return nil, false, err
	}
	if !complete(existing) {
		return nil, false, nil
	}
	slices.SortFunc(existing, func(a, b corev1.ConfigMap) int { return partIndex(&a) - partIndex(&b) })
	r := newReader()
	for i := range existing {
		if err := r.decode(existing[i].BinaryData[chunkKey]); err != nil {
			return nil, false, fmt.Errorf("reading the record of the plan in ConfigMap %s/%s: %w", namespace, existing[i].Name, err)
		}
	}
	return r.plan(), true, nil
}

// Exists reports whether a complete record of the MoveOperation's plan is
// there.
func Exists(ctx context.Context, c client.Reader, namespace string, operation types.UID) (bool, error) {
	existing, err := list(ctx, c, namespace, operation)
	return err == nil && complete(existing), err
}

func list(ctx context.Context, c client.Reader, namespace string, operation types.UID) ([]corev1.ConfigMap, error) {
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms, client.InNamespace(namespace), Selector(operation)); err != nil {
		return nil, fmt.Errorf("listing the record of the plan: %w", err)
	}
	return cms.Items, nil
}

// complete reports whether every part of a record is there, once.
func complete(cms []corev1.ConfigMap) bool {
	if len(cms) == 0 {
		return false
	}
	seen := map[int]bool{}
	for i := range cms {
		n, err := strconv.Atoi(cms[i].Annotations[partsAnnotation])
		if err != nil || n != len(cms) {
			return false
		}
		idx := partIndex(&cms[i])
		if idx < 0 || idx >= n || seen[idx] {
			return false
		}
		seen[idx] = true
	}
	return true
}

func partIndex(cm *corev1.ConfigMap) int {
	i, err := strconv.Atoi(cm.Annotations[partAnnotation])
	if err != nil {
		return -1
	}
	return i
}

// encode cuts the plan into parts of objectsPerPart objects at most, each
// gzipped JSON.
func encode(plan *graph.Plan) ([][]byte, error) {
	var parts [][]byte
	cur := part{Namespaces: plan.RequiredNamespaces()}
	for gk, v := range plan.TargetVersions() {
		if cur.TargetVersions == nil {
			cur.TargetVersions = map[string]string{}
		}
		cur.TargetVersions[gk.Group+"/"+gk.Kind] = v
	}
	kinds := map[schema.GroupVersionKind]int{}
	flush := func() error {
		data, err := compress(cur)
		if err != nil {
			return err
		}
		parts = append(parts, data)
		cur, kinds = part{}, map[schema.GroupVersionKind]int{}
		return nil
	}
	for _, o := range plan.Objects() {
		k, ok := kinds[o.GVK]
		if !ok {
			k = len(cur.Kinds)
			kinds[o.GVK] = k
			cur.Kinds = append(cur.Kinds, o.GVK.Group+"/"+o.GVK.Version+"/"+o.GVK.Kind)
		}
		e := entry{Group: o.Group, Kind: k, Namespace: o.Namespace, Name: o.Name, UID: o.UID, KeepReason: o.KeepReason}
		if !o.Delete {
			e.Flags |= flagKeep
		}
		if o.Global {
			e.Flags |= flagGlobal
		}
		if o.InGlobalHierarchy {
			e.Flags |= flagInGlobalHierarchy
		}
		if o.FoundInTarget {
			e.Flags |= flagFoundInTarget
		}
		cur.Objects = append(cur.Objects, e)
		if len(cur.Objects) == objectsPerPart {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(cur.Objects) > 0 || len(parts) == 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

func compress(p part) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(p); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// reader reads the parts of a record into the groups of one plan. The plan
// is held for the whole move: the strings that repeat across its objects
// (namespaces, keep reasons) are held once, not once per object as decoding
// makes them.
type reader struct {
	groups         [][]*graph.Object
	namespaces     []string
	targetVersions map[schema.GroupKind]string
}

func newReader() *reader { return &reader{} }

// plan is the plan the parts read make.
func (r *reader) plan() *graph.Plan {
	plan := graph.NewPlan(r.groups)
	plan.RequireNamespaces(r.namespaces)
	plan.SetTargetVersions(r.targetVersions)
	return plan
}

// intern returns the canonical copy of s (package unique).
func intern(s string) string { return unique.Make(s).Value() }

// decode adds the objects of one part to the groups, in order.
func (r *reader) decode(data []byte) error {
	groups := &r.groups
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	var p part
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	r.namespaces = append(r.namespaces, p.Namespaces...)
	for k, v := range p.TargetVersions {
		group, kind, ok := cutLast(k)
		if !ok || kind == "" || v == "" {
			return fmt.Errorf("target version %q: %q is not group/Kind", v, k)
		}
		if r.targetVersions == nil {
			r.targetVersions = map[schema.GroupKind]string{}
		}
		r.targetVersions[schema.GroupKind{Group: group, Kind: kind}] = v
	}
	gvks := make([]schema.GroupVersionKind, len(p.Kinds))
	for i, k := range p.Kinds {
		gv, kind, ok := cutLast(k)
		if !ok {
			return fmt.Errorf("kind %q is not group/version/Kind", k)
		}
		parsed, err := schema.ParseGroupVersion(gv)
		if err != nil {
			return fmt.Errorf("kind %q: %w", k, err)
		}
		gvks[i] = parsed.WithKind(kind)
	}
	for _, e := range p.Objects {
		if e.Kind < 0 || e.Kind >= len(gvks) || e.Group < 0 {
			return fmt.Errorf("object %s/%s names kind %d of %d, group %d", e.Namespace, e.Name, e.Kind, len(gvks), e.Group)
		}
		for len(*groups) <= e.Group {
			*groups = append(*groups, nil)
		}
		(*groups)[e.Group] = append((*groups)[e.Group], &graph.Object{
			ObjectRef:         graph.ObjectRef{GVK: gvks[e.Kind], Namespace: intern(e.Namespace), Name: e.Name, UID: e.UID},
			Group:             e.Group,
			Delete:            e.Flags&flagKeep == 0,
			KeepReason:        intern(e.KeepReason),
			Global:            e.Flags&flagGlobal != 0,
			InGlobalHierarchy: e.Flags&flagInGlobalHierarchy != 0,
			FoundInTarget:     e.Flags&flagFoundInTarget != 0,
		})
	}
	return nil
}

// cutLast splits "group/version/Kind" (group empty for the core group, as
// in "/v1/Secret") before its last slash.
func cutLast(s string) (string, string, bool) {
	i := bytes.LastIndexByte([]byte(s), '/')
	if i < 0 {
		return "", "", false
	}
	gv := s[:i]
	if len(gv) > 0 && gv[0] == '/' {
		gv = gv[1:]
	}
	return gv, s[i+1:], true
}

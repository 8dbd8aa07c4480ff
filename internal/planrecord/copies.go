package planrecord

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

const (
	// copiesOfLabel marks the ConfigMaps that record, batch by batch, the
	// copies a move made in the target (value: the operation's UID).
	copiesOfLabel = "move.cluster.x-k8s.io/copies-of"
	copiesKey     = "uids.gz"
)

// SaveCopies records the target UIDs of copies the move made of one group:
// a copy whose managed fields are restored carries nothing else of the
// move, and this is how a restarted operator, or a rollback, still knows it
// as the move's own. The copy records a group in batches, so each call
// writes a ConfigMap of its own, named after the group and the UIDs it
// holds: a call repeated with the same copies (a write whose answer was
// lost, a resumed move) finds its ConfigMap there and changes nothing, and
// no call takes away what an earlier one recorded.
func SaveCopies(ctx context.Context, c client.Client, mo *movev1alpha1.MoveOperation, group int, uids []types.UID) error {
	var raw strings.Builder
	for _, u := range uids {
		raw.WriteString(string(u))
		raw.WriteByte('\n')
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.WriteString(zw, raw.String()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: mo.Namespace,
			Name:      fmt.Sprintf("moveoperation-%s-copies-%d-%s", mo.UID, group, uidsHash(uids)),
			Labels:    map[string]string{copiesOfLabel: string(mo.UID)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: movev1alpha1.GroupVersion.String(), Kind: "MoveOperation", Name: mo.Name, UID: mo.UID,
			}},
		},
		BinaryData: map[string][]byte{copiesKey: buf.Bytes()},
	}
	if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recording %d copies of group %d in ConfigMap %s/%s: %w", len(uids), group+1, cm.Namespace, cm.Name, err)
	}
	return nil
}

// uidsHash names a set of UIDs, whatever their order.
func uidsHash(uids []types.UID) string {
	sorted := slices.Clone(uids)
	slices.Sort(sorted)
	h := fnv.New64a()
	for _, u := range sorted {
		_, _ = io.WriteString(h, string(u))
		_, _ = h.Write([]byte{'\n'})
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// LoadCopies reads every copy recorded for the MoveOperation (target UIDs).
func LoadCopies(ctx context.Context, c client.Reader, namespace string, operation types.UID) (map[types.UID]bool, error) {
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms, client.InNamespace(namespace), client.MatchingLabels{copiesOfLabel: string(operation)}); err != nil {
		return nil, fmt.Errorf("listing the record of the copies: %w", err)
	}
	out := map[types.UID]bool{}
	for i := range cms.Items {
		zr, err := gzip.NewReader(bytes.NewReader(cms.Items[i].BinaryData[copiesKey]))
		if err != nil {
			return nil, fmt.Errorf("reading the record of the copies in ConfigMap %s/%s: %w", namespace, cms.Items[i].Name, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("reading the record of the copies in ConfigMap %s/%s: %w", namespace, cms.Items[i].Name, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if line != "" {
				out[types.UID(line)] = true
			}
		}
	}
	return out, nil
}

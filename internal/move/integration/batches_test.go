//go:build cluster

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
)

// oneGroupOfConfigMaps creates n moved ConfigMaps, each with a second
// field manager, and returns the plan, which puts them in one group.
func oneGroupOfConfigMaps(t *testing.T, ctx context.Context, source client.Client, prefix string, n int) (ns string, p *graph.Plan, group int) {
	t.Helper()
	ns = namespace(t, prefix)
	for i := range n {
		cm := configMap(ns, fmt.Sprintf("cm-%d", i), forceMove)
		create(t, ctx, source, cm)
		managedBy(t, ctx, source, cm, "capi-topology", true, "applied")
	}
	p = plan(t, ctx, source, []string{ns}, graph.Selection{})
	for i, objects := range p.Groups {
		if len(objects) == n {
			return ns, p, i
		}
	}
	t.Fatalf("no group holds the %d ConfigMaps:\n%s", n, p)
	return "", nil, 0
}

// isFieldsPatch says whether a write is the one that gives a copy its
// source's managed fields, and returns the UID of the copy it names.
func isFieldsPatch(obj client.Object, patch client.Patch) (types.UID, bool) {
	data, _ := patch.Data(obj)
	var body struct {
		Metadata struct {
			UID           types.UID        `json:"uid"`
			ManagedFields *json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &body) != nil || body.Metadata.ManagedFields == nil {
		return "", false
	}
	return body.Metadata.UID, true
}

// TestAGroupIsFinishedBatchByBatch copies one group of ten objects in
// batches of three: each batch's copies are recorded, then given their
// managed fields, before the group is copied whole, so that the copy never
// holds the managed fields of a whole group (issue #18); and no copy loses
// the operation's field manager before it is recorded.
func TestAGroupIsFinishedBatchByBatch(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns, p, group := oneGroupOfConfigMaps(t, ctx, source, "batches", 10)

	var (
		mu       sync.Mutex
		events   []string // "create <name>", "fields <uid>", "record"
		recorded = map[types.UID]bool{}
		records  [][]types.UID
	)
	note := func(event string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, event)
	}
	var unrecorded []string
	watched := interceptor.NewClient(watchable(t, env.Target.Config), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetNamespace() == ns {
				note("create " + obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if uid, ok := isFieldsPatch(obj, patch); ok && obj.GetNamespace() == ns {
				note("fields " + obj.GetName())
				mu.Lock()
				if !recorded[uid] {
					unrecorded = append(unrecorded, obj.GetName())
				}
				mu.Unlock()
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	copier := move.NewCopier(source, watched, p, operation(), move.Options{CopyBatch: 3, Concurrency: 2}).
		OnCopied(func(_ context.Context, g int, uids []types.UID) error {
			if g != group {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			records = append(records, slices.Clone(uids))
			for _, u := range uids {
				recorded[u] = true
			}
			events = append(events, "record")
			return nil
		})
	if _, err := copier.CopyGroup(ctx, group); err != nil {
		t.Fatalf("copying the group: %v", err)
	}

	if len(unrecorded) > 0 {
		t.Errorf("managed fields restored on copies not recorded yet: %v", unrecorded)
	}
	var all []types.UID
	for _, r := range records {
		if len(r) > 3 {
			t.Errorf("a record names %d copies, more than a batch of 3", len(r))
		}
		all = append(all, r...)
	}
	var copies []types.UID
	for i := range 10 {
		got, err := get(ctx, target, configMapGVK, ns, fmt.Sprintf("cm-%d", i))
		if err != nil {
			t.Fatalf("reading the copy: %v", err)
		}
		copies = append(copies, got.GetUID())
	}
	slices.Sort(all)
	slices.Sort(copies)
	if diff := cmp.Diff(copies, all); diff != "" {
		t.Errorf("the records name other than every copy, once (-copies +recorded):\n%s", diff)
	}
	lastCreate, firstFields := -1, -1
	for i, e := range events {
		if strings.HasPrefix(e, "create ") {
			lastCreate = i
		}
		if strings.HasPrefix(e, "fields ") && firstFields < 0 {
			firstFields = i
		}
	}
	if firstFields < 0 || firstFields > lastCreate {
		t.Errorf("the first managed fields were restored after the group's last create: the group was finished whole, not by batch:\n%s", strings.Join(events, "\n"))
	}
}

// TestAGroupCopiedAgainAfterItsFinishFailedKnowsTheCopiesItFinished fails
// the managed fields of one copy of a group, then copies the group again
// with the same Copier, as the controller does on its next reconcile. The
// copies finished meanwhile carry no mark of the operation any more but
// its record: the copy must take them as its own, not as conflicts.
func TestAGroupCopiedAgainAfterItsFinishFailedKnowsTheCopiesItFinished(t *testing.T) {
	ctx := testContext(t)
	source, target := clients(t)
	ns, p, group := oneGroupOfConfigMaps(t, ctx, source, "refinish", 6)

	refused := errors.New("refused once")
	var once sync.Once
	failing := interceptor.NewClient(watchable(t, env.Target.Config), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetNamespace() == ns && obj.GetName() == "cm-5" {
				if _, ok := isFieldsPatch(obj, patch); !ok {
					return c.Patch(ctx, obj, patch, opts...)
				}
				var err error
				once.Do(func() { err = refused })
				if err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	copier := move.NewCopier(source, failing, p, operation(), move.Options{CopyBatch: 2}).
		OnCopied(func(context.Context, int, []types.UID) error { return nil })
	if _, err := copier.CopyGroup(ctx, group); !errors.Is(err, refused) {
		t.Fatalf("copying the group the first time: %v, want the refusal", err)
	}
	if _, err := copier.CopyGroup(ctx, group); err != nil {
		t.Fatalf("copying the group again: %v", err)
	}
	for i := range 6 {
		name := fmt.Sprintf("cm-%d", i)
		before, _ := get(ctx, source, configMapGVK, ns, name)
		after, err := get(ctx, target, configMapGVK, ns, name)
		if err != nil {
			t.Fatalf("reading the copy of %s: %v", name, err)
		}
		if diff := cmp.Diff(entries(t, before, nil), entries(t, after, nil)); diff != "" {
			t.Errorf("managed fields of the copy of %s differ from the source's (-source +copy):\n%s", name, diff)
		}
	}
}

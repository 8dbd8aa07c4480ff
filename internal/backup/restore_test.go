package backup

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/graph"
)

// An archive that holds an object the plan would not take (here a Secret
// no Cluster's hierarchy reaches, which a backup never writes) is refused
// by name and with the graph's reason, before anything is written.
func TestARestoreRefusesAnArchiveWhosePlanLeavesObjectsOut(t *testing.T) {
	stray := &unstructured.Unstructured{}
	stray.SetAPIVersion("v1")
	stray.SetKind("Secret")
	stray.SetNamespace("fleet")
	stray.SetName("stray")
	stray.SetUID("uid-stray")
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Encryption{Unencrypted: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(0, stray); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(archive.Index{Namespaces: []string{"fleet"}, PausedBy: "backup-op"}); err != nil {
		t.Fatal(err)
	}
	a, err := archive.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	secrets := graph.Type{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: "secrets", Namespaced: true}
	// The fake client stands in for the cluster's REST mapper alone: Plan
	// reads nothing else of it.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(secrets.GVK, meta.RESTScopeNamespace)
	r := &Restore{Archive: a, Target: fake.NewClientBuilder().WithRESTMapper(mapper).Build(), Operation: "restore-op"}
	_, err = r.Plan(context.Background(), graph.NewTypes(secrets))
	if !errors.Is(err, ErrNotRestorable) || !strings.Contains(err.Error(), "Secret fleet/stray (") {
		t.Errorf("planning an archive with an object no hierarchy reaches returned %v; want %v naming it and why", err, ErrNotRestorable)
	}
}

// Package takeover judges whether the target's live controllers took a
// moved fleet over without churn: every Cluster Available, every Machine
// and MachinePool Running with its status computed for its generation, and
// no VM or Machine created or deleted since the move began. It reads the
// clusters, the simulated clouds' logs (the loop provider's and CAPD's
// in-memory one) and the controllers' write logs of a
// testenv.Env; it never moves anything and never writes.
package takeover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/fleet"
	"github.com/move-operator/move-operator/test/inmemorycloud"
	"github.com/move-operator/move-operator/test/testenv"
)

// InFleet tells whether a namespace (or, for a cluster-scoped object, a
// name) is the fleet's.
func InFleet(f *fleet.Fleet) func(namespace, name string) bool {
	return func(namespace, name string) bool {
		if namespace == "" {
			return name != "" && slices.Contains(f.Identities, name)
		}
		for _, ns := range f.Namespaces {
			if ns == namespace {
				return true
			}
		}
		return false
	}
}

// Available returns why a Cluster of the fleet is not Available in m.
func Available(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	for _, wc := range f.Clusters {
		c := &clusterv1.Cluster{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: wc.Namespace, Name: wc.Name}, c); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if !conditions.IsTrue(c, clusterv1.ClusterAvailableCondition) {
			return fmt.Errorf("%s: cluster %s is not Available", m.Name, wc.Name)
		}
	}
	return nil
}

// Running returns the first Machine or MachinePool of the fleet in m that
// is not Running, or whose status was not computed for its generation. A
// move carries no status: in the target, both are the controllers' work.
func Running(ctx context.Context, m *testenv.Management, f *fleet.Fleet) error {
	for _, kind := range []string{"Machine", "MachinePool"} {
		for _, ns := range f.Namespaces {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(clusterv1.GroupVersion.WithKind(kind + "List"))
			if err := m.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, u := range list.Items {
				phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
				observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
				if phase != "Running" || observed != u.GetGeneration() {
					return fmt.Errorf("%s %s/%s: phase %q, observedGeneration %d of %d", kind, ns, u.GetName(), phase, observed, u.GetGeneration())
				}
			}
		}
	}
	return nil
}

// Quiet returns an error unless no controller of m has written to the
// fleet for the last d: it has settled, nothing is in flight.
func Quiet(m *testenv.Management, keep func(namespace, name string) bool, d time.Duration) error {
	writes := m.CAPI.Writes()
	for i := len(writes) - 1; i >= 0; i-- {
		if w := writes[i]; keep(w.Namespace, w.Name) {
			if since := time.Since(w.Time); since < d {
				return fmt.Errorf("%s: a controller wrote to the fleet %s ago: %s", m.Name, since.Round(time.Second), w)
			}
			return nil
		}
	}
	return nil
}

// Poll calls check every 2 s until it returns nil or bound runs out.
func Poll(ctx context.Context, bound time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// Mark is where the logs stood when a move began.
type Mark struct {
	cloudSeq                   int64
	inMemoryEvents             int
	sourceWrites, targetWrites int
}

// MarkNow records where the clouds' and the controllers' logs stand.
func MarkNow(env *testenv.Env) Mark {
	m := Mark{cloudSeq: env.Cloud.LastSeq(), sourceWrites: len(env.Source.CAPI.Writes()), targetWrites: len(env.Target.CAPI.Writes())}
	if env.InMemory != nil {
		m.inMemoryEvents = len(env.InMemory.Events())
	}
	return m
}

// Churn is what was made or removed for the fleet since a Mark.
type Churn struct {
	// VMs are the cloud's creates, deletes and power-offs.
	VMs []cloud.Event
	// DevVMs are the in-memory cloud's creates and deletes (CAPD's VMs).
	DevVMs []inmemorycloud.Event
	// Machines are the accepted Machine creates and deletes, in either
	// cluster.
	Machines []capiprovider.Write
}

// None reports no churn.
func (c Churn) None() bool { return len(c.VMs) == 0 && len(c.DevVMs) == 0 && len(c.Machines) == 0 }

// CountDev counts the in-memory cloud's VM events of one kind.
func (c Churn) CountDev(op inmemorycloud.Op) int {
	n := 0
	for _, e := range c.DevVMs {
		if e.Op == op {
			n++
		}
	}
	return n
}

// Count counts the VM events of one type.
func (c Churn) Count(t cloud.EventType) int {
	n := 0
	for _, e := range c.VMs {
		if e.Type == t {
			n++
		}
	}
	return n
}

// MachinesCreated counts the Machines created.
func (c Churn) MachinesCreated() int {
	n := 0
	for _, w := range c.Machines {
		if Created(w) {
			n++
		}
	}
	return n
}

// MachinesDeleted counts the Machines deleted.
func (c Churn) MachinesDeleted() int {
	n := 0
	for _, w := range c.Machines {
		if w.Verb == "delete" {
			n++
		}
	}
	return n
}

// Created reports a write that made an object: a create, or a
// server-side apply that answered 201 (Cluster API's MachineSet creates
// its Machines so).
func Created(w capiprovider.Write) bool {
	return w.Verb == "create" || (w.Verb == "patch" && w.Code == http.StatusCreated)
}

// ChurnSince collects the fleet's churn since mark.
func ChurnSince(env *testenv.Env, mark Mark, keep func(namespace, name string) bool) Churn {
	var c Churn
	for _, e := range env.Cloud.EventsSince(mark.cloudSeq) {
		ns, _, _ := strings.Cut(e.VMName, "/")
		if e.Type != cloud.PowerOn && (keep(e.Caller.Namespace, "") || keep(ns, "")) {
			c.VMs = append(c.VMs, e)
		}
	}
	if env.InMemory != nil {
		for _, e := range env.InMemory.Events()[mark.inMemoryEvents:] {
			if ns, _, _ := strings.Cut(e.ResourceGroup, "/"); keep(ns, "") {
				c.DevVMs = append(c.DevVMs, e)
			}
		}
	}
	for _, writes := range [][]capiprovider.Write{env.Source.CAPI.Writes()[mark.sourceWrites:], env.Target.CAPI.Writes()[mark.targetWrites:]} {
		for _, w := range writes {
			if keep(w.Namespace, w.Name) && w.Kind == "Machine" && (Created(w) || w.Verb == "delete") && w.Succeeded() {
				c.Machines = append(c.Machines, w)
			}
		}
	}
	return c
}

// Writes returns the controllers' writes to the fleet since mark, in one
// cluster.
func Writes(m *testenv.Management, from int, keep func(namespace, name string) bool) []capiprovider.Write {
	var out []capiprovider.Write
	for _, w := range m.CAPI.Writes()[from:] {
		if keep(w.Namespace, w.Name) {
			out = append(out, w)
		}
	}
	return out
}

// SourceWrites and TargetWrites are where the mark stands in each write log.
func (m Mark) SourceWrites() int { return m.sourceWrites }

// TargetWrites is where the mark stands in the target's write log.
func (m Mark) TargetWrites() int { return m.targetWrites }

// CloudSeq is where the mark stands in the cloud's log.
func (m Mark) CloudSeq() int64 { return m.cloudSeq }

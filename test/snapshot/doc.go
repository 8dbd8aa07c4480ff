// Package snapshot captures the Cluster API state of a management cluster in
// a normalized, comparable form, so that a test can assert that what arrived
// in a target cluster is exactly what was in the source, and print a readable
// diff when it is not.
//
//	before, err := snapshot.Take(ctx, source, snapshot.Options{Namespaces: []string{"team-a"}})
//	// ... move ...
//	after, err := snapshot.Take(ctx, target, snapshot.Options{Namespaces: []string{"team-a"}})
//	if d := snapshot.Diff(before, after); d != "" {
//		t.Errorf("the target differs from the source (-source +target):\n%s", d)
//	}
//
// What is captured: every object of every CRD labelled
// clusterctl.cluster.x-k8s.io (read in the CRD's storage version), and the
// Secrets and ConfigMaps of the captured namespaces. Per object: kind (with
// group), namespace, name, labels, annotations, everything but metadata and
// status (the spec, or a Secret's type and data), the ownerReferences by kind,
// name, controller and blockOwnerDeletion flags, the finalizers, and the
// managed fields entries of server-side apply (of updates too with
// Options.UpdateManagers) without their times, their paths naming owner
// references by the owner's kind and name. Identity that cannot survive a
// move (UIDs, resourceVersions, generations, timestamps) is left out;
// statuses are left out unless Options.Status asks for them. Secret values
// are replaced by a digest, so a diff never prints them.
//
// UIDs are checked instead: Take records, per object, every owner
// reference whose UID is not that of an object of its kind and name in the
// cluster, and every managed field path naming an owner reference the
// object does not have (what clusterctl's move leaves: it restores managed
// fields with the source's owner UIDs). Diff reports them in got even when
// want has them too.
//
// Take only reads; it never changes the cluster.
package snapshot

package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/internal/preflight"
	"github.com/move-operator/move-operator/internal/remote"
)

// Why a restore refuses to start. Each error wraps one of them, with a
// message that names the objects and says what to do; none is returned
// after the restore wrote anything.
var (
	// ErrNotServed: the cluster does not take a kind the archive holds:
	// it does not serve it, or stores it at another version than the
	// archive holds it in, which the operator does not convert to (a
	// provider's kind, or an older version).
	ErrNotServed = errors.New("the cluster does not take every kind the archive holds")
	// ErrNotRestorable: the plan read from the archive leaves some of its
	// objects out (their owners are not in the archive, say).
	ErrNotRestorable = errors.New("the archive holds objects a restore would leave out")
	// ErrInTheWay: the cluster holds objects under the names of archived
	// ones that the restore did not create.
	ErrInTheWay = errors.New("the cluster holds objects under the names of archived ones")
)

// Restore restores an archive into a cluster: the archive is the source of
// the move's plan and copy, the cluster its target.
type Restore struct {
	Archive *archive.Archive
	Target  client.Client
	// Operation identifies the restore: the field manager of its writes,
	// and the pauses it resumes in an archive clusterctl wrote.
	Operation string
	Options   move.Options
	// Copies are the copies (target UIDs) an earlier run of this restore
	// recorded through OnCopied: a run after a crash knows them as its own.
	Copies map[types.UID]bool
	// OnCopied records the copies of a group before their managed fields
	// are restored (see move.Copier.OnCopied); nil records nothing, and a
	// run after a crash then finds finished copies in its way.
	OnCopied func(ctx context.Context, group int, uids []types.UID) error
}

// Run restores the archive: Plan, Check, every group copied in creation
// order, then Resume. Run again after a crash, with the same Operation and
// the Copies recorded, it finishes what the crashed run began. What stops
// and starts the target's controllers around it is the caller's.
func (r *Restore) Run(ctx context.Context, kinds *graph.Types) (*graph.Plan, error) {
	p, err := r.Plan(ctx, kinds)
	if err != nil {
		return nil, err
	}
	if err := r.Check(ctx, p); err != nil {
		return nil, err
	}
	c := r.Copier(p, kinds)
	for group := range p.Groups {
		if _, err := c.CopyGroup(ctx, group); err != nil {
			return p, fmt.Errorf("restoring: %w", err)
		}
	}
	if _, err := r.Resume(ctx, kinds); err != nil {
		return p, err
	}
	return p, nil
}

// Plan plans the archive's objects as a move plans its source's, with the
// kinds the target moves (graph.DiscoverTypes of the target) at the
// versions the archive holds them in, and checks that the plan restores
// every object the archive holds and that the target takes each kind (see
// Versions). The plan says at which version the target stores each kind
// the archive holds at another (graph.Plan.SetTargetVersions): an archive
// of an older Cluster API restored into a newer one is converted as a move
// converts, by the same Copier.
func (r *Restore) Plan(ctx context.Context, kinds *graph.Types) (*graph.Plan, error) {
	if err := r.checkServed(kinds); err != nil {
		return nil, err
	}
	archived, versions := r.archivedTypes(kinds)
	src := planner.Source{Reader: r.source()}
	p, err := src.Plan(ctx, r.selection(), archived)
	if err != nil {
		return nil, fmt.Errorf("planning the restore: %w", err)
	}
	p.SetTargetVersions(versions)
	if err := r.checkComplete(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Versions lists, per kind the archive holds (Secrets and ConfigMaps
// aside), the version it holds it in, the version the target stores it
// at, and how the restore gets the kind's objects across (as a move's
// preflight.KindVersions does, the archive standing for the source), for
// status.plan.versions. A kind the archive holds in several versions is
// listed once per version.
//
// A restore does not convert back: an archive of a newer Cluster API is
// refused in an older one (RefusalOlderInTarget), since a move back reads
// every object first to refuse what the older version cannot hold
// (preflight.CheckGoingBack), which a restore does not do.
func (r *Restore) Versions(kinds *graph.Types) []preflight.KindVersion {
	var out []preflight.KindVersion
	for _, gvk := range r.archivedGVKs() {
		for _, kv := range preflight.KindVersions(archiveType(gvk, kinds), kinds) {
			if kv.Conversion == preflight.ConversionToOlder {
				kv.Conversion, kv.Refusal = "", preflight.RefusalOlderInTarget
				kv.Message = fmt.Sprintf("%s is archived at %s but stored only at the older %s in the cluster to restore into, and a restore does not convert objects back to an older version of Cluster API: restore into a cluster running the Cluster API version the backed-up cluster ran (or a newer one)",
					kv.Resource, kv.Source, kv.Target)
			}
			out = append(out, kv)
		}
	}
	return out
}

// archivedGVKs returns the kinds and versions the archive holds objects
// of, sorted.
func (r *Restore) archivedGVKs() []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, e := range r.Archive.Index.Objects {
		if gvk := e.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// archiveType is the archive as the source of one kind and version, for
// preflight.KindVersions: the target's type of the kind (its resource
// name, for messages) at the archived version.
func archiveType(gvk schema.GroupVersionKind, kinds *graph.Types) *graph.Types {
	t := graph.Type{GVK: gvk, Resource: strings.ToLower(gvk.Kind) + "s", Namespaced: true}
	if tt, ok := kinds.Lookup(gvk.GroupKind()); ok {
		t = *tt
		t.GVK = gvk
	}
	t.StoredVersions = []string{gvk.Version}
	return graph.NewTypes(t)
}

// archivedTypes returns the target's kinds at the versions the archive
// holds them in, what the plan of the archive is read with, and the
// versions the target stores those at when they differ, what it is
// written with. A kind the archive holds in several versions is read at
// the first: the Copier converts each object from the version it says.
func (r *Restore) archivedTypes(kinds *graph.Types) (*graph.Types, map[schema.GroupKind]string) {
	held := map[schema.GroupKind]string{}
	for _, gvk := range r.archivedGVKs() {
		if _, ok := held[gvk.GroupKind()]; !ok {
			held[gvk.GroupKind()] = gvk.Version
		}
	}
	types := make([]graph.Type, 0, len(kinds.All()))
	versions := map[schema.GroupKind]string{}
	for _, t := range kinds.All() {
		t := *t
		if v, ok := held[t.GVK.GroupKind()]; ok && v != t.GVK.Version {
			versions[t.GVK.GroupKind()] = t.GVK.Version
			t.GVK.Version = v
		}
		types = append(types, t)
	}
	return graph.NewTypes(types...), versions
}

// Check finds what stands in the restore's way in the target: objects
// under the names of archived ones that neither a global object found as
// it is nor an earlier copy of this restore explains. It runs before the
// restore writes anything.
func (r *Restore) Check(ctx context.Context, p *graph.Plan) error {
	targetID, err := remote.ClusterID(ctx, r.Target)
	if err != nil {
		return fmt.Errorf("checking the cluster to restore into: %w", err)
	}
	in, err := preflight.CheckTarget(ctx, r.source(), r.Target, targetID, p)
	if err != nil {
		return fmt.Errorf("checking the cluster to restore into: %w", err)
	}
	var inTheWay []graph.ObjectRef
	for _, ref := range in.Conflicts {
		ours, err := r.isOurs(ctx, p.InTarget(ref))
		if err != nil {
			return err
		}
		if !ours {
			inTheWay = append(inTheWay, ref)
		}
	}
	if len(inTheWay) > 0 {
		return fmt.Errorf("%w: %s; restore into a cluster that does not hold them (delete them, or restore into a new cluster)", ErrInTheWay, preflight.JoinRefs(inTheWay))
	}
	return nil
}

// isOurs reports whether the target's object under ref's name is this
// restore's copy, made before a crash. ref names the target's version.
func (r *Restore) isOurs(ctx context.Context, ref graph.ObjectRef) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GVK)
	if err := r.Target.Get(ctx, ref.Key(), obj); err != nil {
		return false, fmt.Errorf("reading %s in the cluster to restore into: %w", ref, err)
	}
	return move.IsCopyOf(obj, r.Operation, r.Copies), nil
}

// Copier returns the move's Copier of the plan from the archive into the
// target, statuses carried: a restore brings back what the providers keep
// in status (a host's provisioning state), so that nothing provisions
// again. kinds are the target's (graph.DiscoverTypes): the statuses go
// through its status subresources, and a plan read back from its record
// knows no kinds of its own.
func (r *Restore) Copier(p *graph.Plan, kinds *graph.Types) *move.Copier {
	c := move.NewCopier(r.source(), r.Target, p, r.Operation, r.Options).
		CarryStatus(move.StatusSubresources(kinds)).
		WithCopies(r.Copies)
	if r.OnCopied != nil {
		c = c.OnCopied(r.OnCopied)
	}
	return c
}

// Resume resumes, in the target, the Clusters and ClusterClasses the
// backup paused (see archive.Index.PausedBy), and no other. It returns how
// many it resumed.
func (r *Restore) Resume(ctx context.Context, kinds *graph.Types) (int, error) {
	n, err := move.Unpause(ctx, r.Target, kinds, r.pausedBy(), r.Options)
	if err != nil {
		return n, fmt.Errorf("resuming the restored Clusters: %w", err)
	}
	return n, nil
}

// Undo deletes from the target what the restore created there, in the
// reverse of the creation order, namespaces last: the way back for a
// restore that failed before its end, which leaves the cluster as it found
// it. Objects the cluster held before the restore (global objects used as
// found among them) are left alone. Copies must hold every copy OnCopied
// recorded. It returns how many objects and namespaces it deleted.
func (r *Restore) Undo(ctx context.Context, p *graph.Plan) (int, error) {
	// The target's kinds, at its versions, for what else its namespaces
	// hold: the plan's are the archive's.
	kinds, err := graph.DiscoverTypes(ctx, r.Target)
	if err != nil {
		return 0, fmt.Errorf("undoing the restore: %w", err)
	}
	n, err := move.Rollback(ctx, r.Target, kinds, p, r.Operation, r.Copies, r.Options)
	if err != nil {
		return n, fmt.Errorf("undoing the restore: %w", err)
	}
	return n, nil
}

// pausedBy is the operation whose pauses the restored objects carry.
func (r *Restore) pausedBy() string {
	if by := r.Archive.Index.PausedBy; by != "" {
		return by
	}
	return r.Operation
}

// source is the archive as the restore's source. An archive clusterctl
// wrote names no operation that paused it: its paused Clusters and
// ClusterClasses are read as paused by this restore, so that Resume
// resumes them, as clusterctl's own restore does.
func (r *Restore) source() client.Reader {
	if r.Archive.Index.PausedBy != "" {
		return r.Archive.Reader()
	}
	return pausedAs{Reader: r.Archive.Reader(), operation: r.Operation}
}

// selection is what the restore plans: every namespace the archive holds
// objects in or names. The archive holds what its backup's selection
// took, global objects and their credentials included, so the Cluster
// selector is not applied again.
func (r *Restore) selection() planner.Selection {
	ix := r.Archive.Index
	namespaces := slices.Clone(ix.Namespaces)
	for _, e := range ix.Objects {
		if e.Namespace != "" && !slices.Contains(namespaces, e.Namespace) {
			namespaces = append(namespaces, e.Namespace)
		}
	}
	sort.Strings(namespaces)
	return planner.Selection{Namespaces: namespaces}
}

// checkServed fails, naming them, for the archived kinds the target does
// not take (see Versions): not moved or not served there, or stored there
// at another version the operator does not convert the archived one to.
// Each kind and version is asked once, however many objects the archive
// holds of it.
func (r *Restore) checkServed(kinds *graph.Types) error {
	counts := map[schema.GroupVersionKind]int{}
	for _, e := range r.Archive.Index.Objects {
		counts[e.GroupVersionKind()]++
	}
	why := map[schema.GroupVersionKind]string{}
	for _, kv := range r.Versions(kinds) {
		if kv.Refusal != "" {
			why[kv.GroupKind.WithVersion(kv.Source)] = kv.Message
		}
	}
	var missing []string
	for gvk, n := range counts {
		_, moved := kinds.Lookup(gvk.GroupKind())
		msg, refused := why[gvk]
		if moved && !refused {
			continue
		}
		entry := fmt.Sprintf("%s %s (%d)", graph.KindString(gvk.GroupKind()), gvk.Version, n)
		if refused {
			entry += ": " + msg
		}
		missing = append(missing, entry)
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("%w: %s; install the providers the backed-up cluster ran (clusterctl init), at versions that store these as the archive holds them or a newer version of Cluster API's own kinds, then restore again", ErrNotServed, strings.Join(missing, "; "))
}

// leftOut is an archived object the plan leaves out, and why.
type leftOut struct {
	entry archive.Entry
	why   string
}

func (l leftOut) String() string {
	if l.why == "" {
		return l.entry.String()
	}
	return l.entry.String() + " (" + l.why + ")"
}

// checkComplete fails, naming them and why, for the archived objects the
// plan leaves out.
func (r *Restore) checkComplete(p *graph.Plan) error {
	why := map[types.UID]string{}
	for _, x := range p.Excluded {
		why[x.UID] = x.Message
	}
	var left []leftOut
	for _, e := range r.Archive.Index.Objects {
		if _, ok := p.Object(e.UID); !ok {
			left = append(left, leftOut{entry: e, why: why[e.UID]})
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; restore an archive a backup wrote whole", ErrNotRestorable, graph.JoinFirstTen(left, "; "))
}

package preflight

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/planner"
	"github.com/move-operator/move-operator/internal/remote"
)

// Finding is one reason a move cannot start, with what to do about it.
type Finding struct {
	// Check is the name of the check that found it.
	Check string
	// Reason is the condition reason the MoveOperation reports.
	Reason string
	// Message says what is wrong and what to do.
	Message string
	// Retry is set when a fix outside the MoveOperation (the target's
	// Secret, the network) lets the same MoveOperation go on: the move
	// waits for it instead of failing.
	Retry bool
}

// Warning is something a user should know that does not stop the move.
type Warning struct {
	// Reason is set when the warning is also worth a Warning event.
	Reason  string
	Message string
}

// Env is what the checks of one MoveOperation read, and what they learn
// for the checks after them and for the move itself. A check that needs
// what an earlier check could not learn (a reachable target, a plan) finds
// nothing: the earlier check's finding says why.
type Env struct {
	// Source is the cluster the move reads, without a cache.
	Source client.Client
	// Object is the MoveOperation's metadata: who created it, and when.
	Object metav1.Object
	// CreatorPolicy names the ValidatingAdmissionPolicy that checked the
	// creator at admission (package creator).
	CreatorPolicy string
	// Spec and UID are the MoveOperation's; Namespace is its namespace,
	// where the target's kubeconfig Secret is.
	Spec      movev1alpha1.MoveOperationSpec
	UID       types.UID
	Namespace string
	// ClaimNamespace is where the claim's Lease is (the operator's own
	// namespace), for the access check.
	ClaimNamespace string
	// Connect returns the target's client. A *remote.Error (the Secret or
	// its kubeconfig is wrong) is a finding a user can fix; any other
	// error is retried.
	Connect func(ctx context.Context) (*remote.Target, error)

	// Target is the target, once reachable.
	Target *remote.Target
	// Selection is what the spec selects (planner.SelectionOf): its
	// namespaces, and its Cluster selector once valid.
	Selection planner.Selection
	// SourceTypes and TargetTypes are the kinds that move, in each cluster.
	SourceTypes, TargetTypes *graph.Types
	// KindVersions are, per kind, the versions both clusters store it at
	// and how the move gets its objects across (see KindVersions): the
	// decision status.plan.versions records, once the target's kinds are
	// known.
	KindVersions []KindVersion
	// SourceTypesCache is the operator's cache of the source's kinds
	// (nil: none kept beyond these checks).
	SourceTypesCache *graph.TypesCache
	// Plan is what the move takes, once the source was read.
	Plan *graph.Plan
	// GitOps is what the GitOps check found, for status.plan.gitOps.
	GitOps *movev1alpha1.GitOpsReport

	// Findings and Warnings are what the checks found, in their order.
	Findings []Finding
	Warnings []Warning

	check         string
	selectorValid bool
	targetChecked bool
	// accessDenied is set when the operator may not do everything the
	// move does: the checks after it that read the moved kinds do not
	// run, so that their 403s are not reported twice.
	accessDenied bool
	// creator is who created the MoveOperation, once known; creatorRefused
	// is set when the move may not act on their behalf: no later check runs.
	creator        *access.User
	creatorRefused bool
}

// find records a finding of the running check.
func (e *Env) find(reason, message string) {
	e.Findings = append(e.Findings, Finding{Check: e.check, Reason: reason, Message: message})
}

// warn records a warning; with a reason it is also worth an event.
func (e *Env) warn(reason, message string) {
	e.Warnings = append(e.Warnings, Warning{Reason: reason, Message: message})
}

// targetReady reports whether the checks that read the target can run: it
// answered, and it is not the source.
func (e *Env) targetReady() bool { return e.Target != nil && e.targetChecked }

// Check is one named check. It records findings and warnings in the Env;
// an error is a failure to check (an API server that does not answer), for
// the caller to retry.
type Check struct {
	Name string
	Run  func(ctx context.Context, e *Env) error
}

// Checks are the checks a move passes before it writes anything, in the
// order they run: the creator's rights first, the input then, then the target, then the operator's
// access, then what moves.
func Checks() []Check {
	return []Check{
		// Before anything the move is about is read: the creator's rights.
		{"creator-policy", checkCreatorPolicy},
		{"creator", checkCreator},
		{"selectors", checkSelectors},
		{"namespaces", checkNamespaces},
		{"target", checkTarget},
		{"kinds", checkKinds},
		// After the kinds are known, before anything lists them.
		{"access", checkAccess},
		{"providers", checkProviders},
		{"managers", checkManagers},
		{"plan", checkPlan},
		// Before anything else reads what the plan found.
		{"creator-plan", checkCreatorPlan},
		{"target-secret", checkTargetSecretStays},
		{"provisioned", checkProvisioned},
		{"target-objects", checkTargetObjects},
		// Reads whole objects of the plan: after the creator may.
		{"going-back", checkGoingBack},
		{"gitops", checkGitOps},
	}
}

// BackupChecks are the checks a backup (spec.target.archive) passes
// before it writes anything: a move's, but for those of a target cluster
// and of the GitOps managers (a backup deletes nothing they would apply
// again). What is checked of the archive's store and keys is the
// reconciler's, which holds the stores.
func BackupChecks() []Check {
	notForBackups := map[string]bool{"target": true, "providers": true, "target-secret": true, "target-objects": true, "going-back": true, "gitops": true}
	var out []Check
	for _, c := range Checks() {
		if !notForBackups[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// RestoreChecks are the checks of a restore's spec (spec.source.archive)
// before its archive is read: the creator's rights first, then its
// selectors. What the archive holds is checked against the cluster it
// restores into by the reconciler (package backup).
func RestoreChecks() []Check {
	forRestores := map[string]bool{"creator-policy": true, "creator": true, "selectors": true}
	var out []Check
	for _, c := range Checks() {
		if forRestores[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// Evaluate runs the checks in order, every one of them, so that a dry run
// reports every finding at once, not only the first; once the access check
// has found access missing, only the checks that read no more than it did
// run (see readsOnlyWhatAccessNeeds).
func Evaluate(ctx context.Context, e *Env, checks []Check) error {
	for _, c := range checks {
		if e.creatorRefused {
			break
		}
		if e.accessDenied && !readsOnlyWhatAccessNeeds[c.Name] {
			continue
		}
		e.check = c.Name
		if err := c.Run(ctx, e); err != nil {
			return fmt.Errorf("check %s: %w", c.Name, err)
		}
	}
	e.check = ""
	return nil
}

// readsOnlyWhatAccessNeeds are the checks that run before the access
// check: they read the namespaces, the target's kube-system and the CRDs,
// whose 403s are the reconciler's to report. Every later check lists or
// reads what the access check found missing, or may.
var readsOnlyWhatAccessNeeds = map[string]bool{"creator-policy": true, "creator": true, "selectors": true, "namespaces": true, "target": true, "kinds": true, "access": true}

func checkSelectors(_ context.Context, e *Env) error {
	sel, err := planner.SelectionOf(e.Spec)
	e.Selection = sel
	if err != nil {
		e.find(movev1alpha1.ReasonInvalidSelector, err.Error())
	} else {
		e.selectorValid = true
	}
	if e.Spec.Controllers.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(e.Spec.Controllers.Selector); err != nil {
			e.find(movev1alpha1.ReasonInvalidSelector, fmt.Sprintf("spec.controllers.selector is not a valid label selector: %v", err))
		}
	}
	return nil
}

func checkNamespaces(ctx context.Context, e *Env) error {
	for _, ns := range e.Selection.Namespaces {
		err := e.Source.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
		switch {
		case apierrors.IsNotFound(err):
			e.find(movev1alpha1.ReasonNamespaceNotFound, fmt.Sprintf("namespace %q in spec.namespaces does not exist in the source cluster; create a MoveOperation listing existing namespaces", ns))
		case err != nil:
			return fmt.Errorf("getting namespace %s: %w", ns, err)
		}
	}
	return nil
}

// checkTarget connects to the target and makes sure it is another cluster
// than the source, by the UID of their kube-system namespaces: two API
// server URLs may lead to one cluster, and a move onto itself would delete
// everything it copied.
func checkTarget(ctx context.Context, e *Env) error {
	t, err := e.Connect(ctx)
	if err != nil {
		var re *remote.Error
		if errors.As(err, &re) {
			e.Findings = append(e.Findings, Finding{Check: e.check, Reason: re.Reason, Message: re.Message, Retry: true})
			return nil
		}
		return fmt.Errorf("connecting to the target: %w", err)
	}
	e.Target = t
	sourceID, err := remote.ClusterID(ctx, e.Source)
	if err != nil {
		return fmt.Errorf("source cluster: %w", err)
	}
	targetID, err := remote.ClusterID(ctx, t.Client)
	if err != nil {
		e.Findings = append(e.Findings, Finding{Check: e.check, Reason: movev1alpha1.ReasonTargetUnreachable, Retry: true, Message: fmt.Sprintf(
			"the target API server %s does not answer: %v; check the kubeconfig Secret and the network (retrying)", t.Server, err)})
		return nil
	}
	if sourceID == targetID {
		e.find(movev1alpha1.ReasonTargetIsSource, fmt.Sprintf(
			"the kubeconfig points at the source cluster itself (%s): a move onto itself would delete what it copied; point it at the target cluster", t.Server))
		return nil
	}
	e.targetChecked = true
	return nil
}

// checkKinds discovers the kinds that move in both clusters, and decides,
// per kind, at which version the target takes its objects: the source's,
// or another Cluster API version, newer or older, the operator converts
// them to (see KindVersions; what an older one cannot hold is checked once
// the objects are read, checkGoingBack). A kind the target cannot take is refused by name, with
// what to install, before anything is stopped.
func checkKinds(ctx context.Context, e *Env) error {
	if e.SourceTypesCache == nil {
		e.SourceTypesCache = &graph.TypesCache{}
	}
	// Both clusters at once: a list of Cluster API's CRDs, schemas and
	// all, is the largest read of a small move's checks.
	var source, target *graph.Types
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if source, err = e.SourceTypesCache.Discover(gctx, e.Source); err != nil {
			return fmt.Errorf("discovering the kinds to move in the source: %w", err)
		}
		return nil
	})
	if e.targetReady() {
		g.Go(func() (err error) {
			if target, err = graph.DiscoverTypes(gctx, e.Target.Client); err != nil {
				return fmt.Errorf("discovering the kinds to move in the target: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	e.SourceTypes = source
	if !e.targetReady() {
		return nil
	}
	e.TargetTypes = target
	e.KindVersions = KindVersions(e.SourceTypes, e.TargetTypes)
	if err := Refusals(e.KindVersions); err != nil {
		e.find(movev1alpha1.ReasonCRDMismatch, err.Error())
	}
	return nil
}

func checkProviders(ctx context.Context, e *Env) error {
	if !e.targetReady() {
		return nil
	}
	err := CheckProviders(ctx, e.Source, e.Target.Client, OlderClusterAPI(e.KindVersions))
	var mismatch *ProviderMismatch
	switch {
	case errors.As(err, &mismatch):
		e.find(movev1alpha1.ReasonProviderMissing, err.Error())
	case err != nil:
		return fmt.Errorf("reading the installed providers: %w", err)
	}
	return nil
}

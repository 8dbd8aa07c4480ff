package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/cluster-api/util/finalizers"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/claim"
	"github.com/move-operator/move-operator/internal/graph"
	"github.com/move-operator/move-operator/internal/move"
	"github.com/move-operator/move-operator/internal/remote"
)

// MoveOperationReconciler drives MoveOperations through their phases.
//
// It keeps nothing in memory that a move needs in order to continue: the
// MoveOperation's status, the annotations on Deployments and webhook
// configurations and the record of the plan and of the copies
// (internal/planrecord) are the only memory. The plans it caches between
// reconciles are read back from the clusters after a restart.
type MoveOperationReconciler struct {
	// Client reads MoveOperations (from the manager's cache) and writes them.
	Client client.Client
	// Source reads and writes the source cluster directly, without a cache:
	// a move reads each object once, and a cache would hold every object of
	// every kind in memory.
	Source client.Client
	// APIReader reads Secrets without a cache, so the operator needs only
	// "get" on the Secrets it is pointed at, and the MoveOperation holding
	// the claim, which must not be judged from a stale cache.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Targets builds and caches target clients from kubeconfig Secrets.
	Targets *remote.Clients
	// Claim is the Lease that lets one MoveOperation at a time move this
	// source cluster. Default: claim.DefaultName in namespace "default".
	Claim types.NamespacedName
	// Self is the operator's own Deployment, never scaled down, even when it
	// matches the controllers selector.
	Self types.NamespacedName
	// Move tunes the engine's bulk operations (requests in flight).
	Move move.Options
	// CreatorPolicy names the ValidatingAdmissionPolicy that checks a
	// MoveOperation's creator at admission, which a move requires
	// (package creator). Default: the installer's.
	CreatorPolicy string
	// PollInterval is how often a wait (for pods, for block-move) looks again.
	PollInterval time.Duration
	// Archives is where backups (spec.target.archive) keep their archives
	// on the operator's own volumes.
	Archives Archives

	// lastErrors holds, per MoveOperation, the last error reported, so that
	// each distinct error is logged once, not on every retry.
	lastErrors sync.Map

	// memos caches, per MoveOperation UID, what is costly to rebuild on every
	// reconcile (the plan, the copier). Losing it costs time, never safety.
	memos sync.Map

	// sourceTypes keeps the source's kinds between the phases that read
	// them, read again whole only when a CRD changed.
	sourceTypes graph.TypesCache

	// stalls counts the stalled moves in move_operator_moves_stalled and
	// bounds how often their Warning events repeat (see recordStall).
	stalls stalls

	// local is the operator's own cluster as a restore's target, made
	// once (see localTarget).
	local     *remote.Target
	localOnce sync.Once

	// clock tells the time written in the conditions and that the stall
	// events are timed by: time.Now, unless a test sets another.
	clock func() time.Time
}

// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=move.cluster.x-k8s.io,resources=moveoperations/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
//
// A move is held to its creator's rights: the admission policy that checked
// them is read, and the creator's rights asked with SubjectAccessReviews.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies,verbs=get
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicybindings,verbs=list
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Secrets and ConfigMaps of the moved hierarchies (the cluster Secrets, the
// ClusterResourceSet resources) move with them, so they are listed and
// deleted; the target kubeconfig Secret is read with a plain GET.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create
//
// What a move does to the source cluster: it scales provider controllers
// (patch), adds its webhook bypass to their webhook configurations
// (update), and reads, pauses (patch) and deletes the Cluster API objects
// (any CRD labelled clusterctl.cluster.x-k8s.io, plus the Secrets and
// ConfigMaps of the moved hierarchies). Kinds of other groups come from
// ClusterRoles labelled move.cluster.x-k8s.io/aggregate-to-manager
// (docs/access.md).
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list
// +kubebuilder:rbac:groups=cluster.x-k8s.io;infrastructure.cluster.x-k8s.io;bootstrap.cluster.x-k8s.io;controlplane.cluster.x-k8s.io;addons.cluster.x-k8s.io;ipam.cluster.x-k8s.io,resources=*,verbs=get;list;patch;delete
//
// runtime.cluster.x-k8s.io holds only cluster-scoped kinds (ExtensionConfig):
// copied, never deleted from the source.
// +kubebuilder:rbac:groups=runtime.cluster.x-k8s.io,resources=*,verbs=get;list;patch
// +kubebuilder:rbac:groups=clusterctl.cluster.x-k8s.io,resources=providers,verbs=list
//
// cluster-api-operator's provider objects are the inventory of providers it
// installed (clusterctl's is absent there): the provider check reads them.
// +kubebuilder:rbac:groups=operator.cluster.x-k8s.io,resources=coreproviders;bootstrapproviders;controlplaneproviders;infrastructureproviders;ipamproviders;addonproviders;runtimeextensionproviders,verbs=list
//
// The webhook bypass is scoped to the operator's own username, which it
// learns from the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create
//
// The access preflight asks the API server whether the operator may do
// what the move will do, before its first write (SelfSubjectAccessReview).
// Kubernetes lets every authenticated user ask (system:basic-user), but a
// cluster may have narrowed that role: granted here, the preflight never
// depends on it.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
//
// The claim Lease lives in the manager's namespace, beside the leader
// election Lease: the leader election Role grants it there.

// maxRetryDelay bounds the backoff between retries of a failing reconcile.
const maxRetryDelay = 30 * time.Second

// SetupWithManager registers the reconciler with the manager.
func (r *MoveOperationReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	if r.PollInterval == 0 {
		// Every provider stays stopped while the move waits for pods to go
		// or to become Available: a second between looks costs a few cheap
		// reads and keeps those waits short.
		r.PollInterval = time.Second
	}
	if options.RateLimiter == nil {
		// controller-runtime's default backoff grows to 16 minutes: a move
		// retrying an unreachable target with every provider stopped would
		// go on that long after the target is back. Half a minute at most.
		options.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, maxRetryDelay)
	}
	if r.Claim.Name == "" {
		r.Claim.Name = claim.DefaultName
	}
	if r.Claim.Namespace == "" {
		r.Claim.Namespace = metav1.NamespaceDefault
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&movev1alpha1.MoveOperation{}).
		WithOptions(options).
		Complete(r)
}

// Reconcile moves a MoveOperation one durable step forward, then writes its
// status, so that a restarted operator re-enters the step it was in.
//
// An error is retried with the controller's backoff like any returned error,
// but reported by reportError, once per distinct error in a row:
// controller-runtime would log it with a stack trace on every retry, which
// buries the one line a user of a stuck move needs.
func (r *MoveOperationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil {
		// Requeue (without an error) backs off exactly as an error would.
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue is what we want, without controller-runtime's log line
	}
	r.lastErrors.Delete(req.NamespacedName)
	return res, nil
}

func (r *MoveOperationReconciler) reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	mo := &movev1alpha1.MoveOperation{}
	if err := r.Client.Get(ctx, req.NamespacedName, mo); err != nil {
		if apierrors.IsNotFound(err) {
			r.stalls.forget(req.NamespacedName) // a deleted move is stalled no more
			return ctrl.Result{}, nil
		}
		err = fmt.Errorf("getting MoveOperation %s: %w", req.NamespacedName, err)
		r.reportError(ctx, req.NamespacedName, nil, err)
		return ctrl.Result{}, err
	}
	logger := log.FromContext(ctx).WithValues("phase", phaseOf(mo))
	ctx = log.IntoContext(ctx, logger)

	// Without the finalizer, a deletion before the point of no return could
	// not roll back. Add it before anything else, and reconcile again.
	added, err := finalizers.EnsureFinalizer(ctx, r.Client, mo, movev1alpha1.MoveOperationFinalizer)
	if err != nil {
		err = fmt.Errorf("adding finalizer to MoveOperation %s: %w", req.NamespacedName, err)
		r.reportError(ctx, req.NamespacedName, mo, err)
		return ctrl.Result{}, err
	}
	if added {
		// The patch is an update event: the next reconcile follows it.
		return ctrl.Result{}, nil
	}

	s := newScope(mo)
	defer r.settle(ctx, req.NamespacedName, s, &res, &retErr)

	if !mo.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcilePhase(ctx, s)
}

// settle ends every reconcile, whatever happened in it: the conditions
// computed from the facts, the status patched (observedGeneration bumped
// only when the reconcile succeeded), the transitions and stalls reported,
// and, once the move's end is written, the claim and the finalizer let go.
func (r *MoveOperationReconciler) settle(ctx context.Context, key types.NamespacedName, s *scope, res *ctrl.Result, retErr *error) {
	mo := s.mo
	now := r.now()
	setConditions(s, now)
	if *retErr == nil {
		mo.Status.ObservedGeneration = mo.Generation
	}
	if err := r.patchStatus(ctx, s); err != nil {
		if apierrors.IsConflict(err) && *retErr == nil {
			// This reconcile started from a stale copy; its step is
			// idempotent, so the next one simply does it again.
			log.FromContext(ctx).V(1).Info("status changed meanwhile, reconciling again")
			*res = ctrl.Result{RequeueAfter: 100 * time.Millisecond}
			return
		}
		*retErr = kerrors.NewAggregate([]error{*retErr, err})
		return
	}
	r.recordTransitions(ctx, s)
	r.recordStall(ctx, s, now)
	if n := len(s.transitions); n > 0 && s.transitions[n-1].to.IsTerminal() {
		// Only once the end is written: released earlier, the claim
		// could go to another move while this one still restores. (A
		// crash before this line is made good by the next reconcile of
		// the ended MoveOperation, which releases again.)
		if err := r.release(ctx, mo); err != nil {
			*retErr = kerrors.NewAggregate([]error{*retErr, err})
		}
	}
	if s.removeFinalizer {
		if err := r.removeFinalizer(ctx, mo); err != nil {
			*retErr = kerrors.NewAggregate([]error{*retErr, err})
		}
	}
	if *retErr != nil {
		r.reportError(ctx, key, mo, *retErr)
	}
}

// now is the time by the reconciler's clock.
func (r *MoveOperationReconciler) now() time.Time {
	if r.clock != nil {
		return r.clock()
	}
	return time.Now()
}

func (r *MoveOperationReconciler) removeFinalizer(ctx context.Context, mo *movev1alpha1.MoveOperation) error {
	if !controllerutil.ContainsFinalizer(mo, movev1alpha1.MoveOperationFinalizer) {
		return nil
	}
	patch := client.MergeFrom(mo.DeepCopy())
	controllerutil.RemoveFinalizer(mo, movev1alpha1.MoveOperationFinalizer)
	if err := r.Client.Patch(ctx, mo, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from MoveOperation %s/%s: %w", mo.Namespace, mo.Name, err)
	}
	return nil
}

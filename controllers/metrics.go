package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Metrics, served on the manager's metrics endpoint next to
// controller-runtime's own.
var (
	phaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "move_operator_phase_transitions_total",
		Help: "Phases entered by MoveOperations, by phase.",
	}, []string{"phase"})

	operationsCompleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "move_operator_operations_completed_total",
		Help: "MoveOperations that ended, by result (Done or Failed) and, for failures, reason.",
	}, []string{"result", "reason"})

	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "move_operator_phase_duration_seconds",
		Help:    "Time MoveOperations spent in each phase.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 14), // 0.1 s to about 14 min
	}, []string{"phase"})

	objectsCopied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "move_operator_objects_copied_total",
		Help: "Objects created in target clusters.",
	})

	objectsDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "move_operator_objects_deleted_total",
		Help: "Objects deleted from the source cluster after being copied.",
	})

	// reconcileErrors counts what controller-runtime's own error counter
	// cannot: Reconcile hands its errors back as a plain rate-limited
	// requeue (see Reconcile), so that they are logged once, not on every
	// retry.
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "move_operator_reconcile_errors_total",
		Help: "Reconciles of MoveOperations that ended in an error and are retried with backoff, by phase (empty when the MoveOperation could not be read).",
	}, []string{"phase"})

	// movesStalled is what an alert on a stuck move reads: a stalled move
	// goes on only once a human acts, possibly with every provider it
	// stopped still at zero. It counts the moves this process reconciled
	// (see stalls), so a restarted operator counts each again at once.
	movesStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "move_operator_moves_stalled",
		Help: "MoveOperations that wait for a human to act before they can go on (Stalled=True), by phase and reason (the Stalled condition's). A Failed MoveOperation has ended and is not counted.",
	}, []string{"phase", "reason"})
)

func init() {
	metrics.Registry.MustRegister(phaseTransitions, operationsCompleted, phaseDuration, objectsCopied, objectsDeleted, reconcileErrors, movesStalled, backupsMissed, backupsFailed)
}

// observeTransition counts a phase entered and times the phase left.
func observeTransition(mo *movev1alpha1.MoveOperation, from, to movev1alpha1.MovePhase, at time.Time) {
	phaseTransitions.WithLabelValues(string(to)).Inc()
	ts := mo.Status.PhaseTransitions
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].Phase == from && ts[i].Time.Time.Before(at) {
			phaseDuration.WithLabelValues(string(from)).Observe(at.Sub(ts[i].Time.Time).Seconds())
			break
		}
	}
	switch to {
	case movev1alpha1.PhaseDone:
		operationsCompleted.WithLabelValues(string(to), "").Inc()
	case movev1alpha1.PhaseFailed:
		operationsCompleted.WithLabelValues(string(to), mo.Status.FailureReason).Inc()
	}
}

// The schedules' metrics: a backup not taken, or taken and failed, is
// what an alert on a fleet's backups watches for.
var (
	backupsMissed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "move_operator_backups_missed_total",
		Help: "Backups of a BackupSchedule whose time passed without one being started (the operator was down, or the last backup still ran).",
	}, []string{"namespace", "schedule"})
	backupsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "move_operator_backups_failed_total",
		Help: "Backups of a BackupSchedule that ended Failed.",
	}, []string{"namespace", "schedule"})
)

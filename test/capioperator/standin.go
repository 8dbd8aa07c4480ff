package capioperator

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/localcluster"
)

// InstallerLabels are the labels cluster-api-operator's release manifests
// and Helm chart put on its Deployment.
var InstallerLabels = map[string]string{"clusterctl.cluster.x-k8s.io/core": "capi-operator"}

// createManagerDeployment creates a manager's Deployment key: one replica,
// its pods labelled podLabels plus labels, given a grace period when one
// is set.
func createManagerDeployment(ctx context.Context, c client.Client, key types.NamespacedName, labels, podLabels map[string]string, grace *int64) error {
	podLabels = maps.Clone(podLabels)
	maps.Copy(podLabels, labels)
	d := kwokDeployment(key, labels, podLabels, 1, "registry.k8s.io/capi-operator/cluster-api-operator:v0.29.0")
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = grace
	return c.Create(ctx, d)
}

// kwokDeployment is a Deployment whose pods, one container named manager,
// are placed on the cluster's kwok node.
func kwokDeployment(key types.NamespacedName, labels, podLabels map[string]string, replicas int32, image string) *appsv1.Deployment {
	nodeSelector, tolerations := localcluster.PodPlacement()
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Tolerations:  tolerations,
					Containers:   []corev1.Container{{Name: "manager", Image: image}},
				},
			},
		},
	}
}

// ScaleUp is a provider Deployment the stand-in scaled from zero back to one.
type ScaleUp struct {
	Deployment types.NamespacedName
	At         time.Time
}

// StandIn is a stand-in for cluster-api-operator's controller in one
// cluster: a Deployment of its own, and a loop in the test process that,
// while that Deployment has a Ready pod, scales every provider Deployment
// (those labelled ProviderLabel) found at zero back to one replica.
type StandIn struct {
	// Key is the stand-in's own Deployment.
	Key types.NamespacedName

	c             client.Client
	providerLabel string
	podLabels     map[string]string

	mu       sync.Mutex
	scaleUps []ScaleUp
	lastErr  error

	cancel context.CancelFunc
	done   chan struct{}
}

// StandInOptions tune StartStandIn.
type StandInOptions struct {
	// Labels of the Deployment. Default InstallerLabels.
	Labels map[string]string
	// ProviderLabel marks the provider Deployments it manages.
	ProviderLabel string
	// Interval between two looks at the providers. Default 50ms.
	Interval time.Duration
}

// StartStandIn creates the stand-in's Deployment key (one replica, pods
// placed on the cluster's kwok node) and runs its loop until Stop.
func StartStandIn(ctx context.Context, c client.Client, key types.NamespacedName, opts StandInOptions) (*StandIn, error) {
	if opts.Labels == nil {
		opts.Labels = InstallerLabels
	}
	if opts.Interval <= 0 {
		opts.Interval = 50 * time.Millisecond
	}
	podLabels := map[string]string{"app": "stand-in-" + key.Name}
	if err := createManagerDeployment(ctx, c, key, opts.Labels, podLabels, nil); err != nil {
		return nil, fmt.Errorf("creating the stand-in Deployment %s: %w", key, err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	s := &StandIn{Key: key, c: c, providerLabel: opts.ProviderLabel, podLabels: podLabels, cancel: cancel, done: make(chan struct{})}
	go s.run(loopCtx, opts.Interval)
	return s, nil
}

func (s *StandIn) run(ctx context.Context, interval time.Duration) {
	defer close(s.done)
	for {
		err := s.reconcile(ctx)
		if err != nil && ctx.Err() == nil {
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// reconcile does one round of the stand-in's work, if it runs: a pod of
// its Deployment is Ready (terminating or not: a real controller goes on
// reconciling during its grace period).
func (s *StandIn) reconcile(ctx context.Context) error {
	running, err := s.Running(ctx)
	if err != nil || !running {
		return err
	}
	list := &appsv1.DeploymentList{}
	if err := s.c.List(ctx, list, client.HasLabels{s.providerLabel}); err != nil {
		return fmt.Errorf("listing provider Deployments: %w", err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if ptr.Deref(d.Spec.Replicas, 1) != 0 {
			continue
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](1)
		if err := s.c.Patch(ctx, d, patch); err != nil {
			return fmt.Errorf("scaling provider Deployment %s/%s back to 1: %w", d.Namespace, d.Name, err)
		}
		s.mu.Lock()
		s.scaleUps = append(s.scaleUps, ScaleUp{Deployment: client.ObjectKeyFromObject(d), At: time.Now()})
		s.mu.Unlock()
	}
	return nil
}

// Running reports whether the stand-in's Deployment has a Ready pod.
func (s *StandIn) Running(ctx context.Context) (bool, error) {
	pods := &corev1.PodList{}
	if err := s.c.List(ctx, pods, client.InNamespace(s.Key.Namespace), client.MatchingLabels(s.podLabels)); err != nil {
		return false, fmt.Errorf("listing the stand-in's pods: %w", err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
	}
	return false, nil
}

// ScaleUps returns the provider scale-ups it made, oldest first.
func (s *StandIn) ScaleUps() []ScaleUp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ScaleUp(nil), s.scaleUps...)
}

// Err returns the last error of its loop, if any.
func (s *StandIn) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Stop ends the loop and deletes the stand-in's Deployment.
func (s *StandIn) Stop(ctx context.Context) error {
	s.cancel()
	<-s.done
	return client.IgnoreNotFound(s.c.Delete(ctx, deploymentRef(s.Key)))
}

func deploymentRef(key types.NamespacedName) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}

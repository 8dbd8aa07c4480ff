package capioperator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Offline is a provider the real cluster-api-operator installs offline,
// from a ConfigMap its provider object selects (spec.fetchConfig.selector):
// its components are one small controller Deployment, its metadata one
// release series of the v1beta1 contract.
type Offline struct {
	Provider
	// Deployment names the controller Deployment of its components.
	Deployment string
	// Replicas are the Deployment's replicas in its components: what
	// cluster-api-operator applies, whenever it applies them.
	Replicas int32
}

// componentsLabel marks, with the provider's name as value, the ConfigMap
// its provider object selects.
const componentsLabel = "capioperator.move-operator.test/components"

// versionLabel is cluster-api-operator's label for the version a
// ConfigMap holds (without it, the ConfigMap's name must be the version).
const versionLabel = "provider.cluster.x-k8s.io/version"

// Install creates the ConfigMap of p's components and metadata and p's
// provider object selecting it. cluster-api-operator, when it runs, does
// the rest: it checks it, renders the components (labels, namespace, owner
// reference to the provider object), applies them, keeps them in a cache
// Secret, records it in clusterctl's inventory and reports it installed.
func (p Offline) Install(ctx context.Context, c client.Client) error {
	components, err := p.components()
	if err != nil {
		return err
	}
	v, err := semverMajorMinor(p.Version)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name + "-" + p.Version,
			Labels: map[string]string{componentsLabel: p.Name, versionLabel: p.Version},
		},
		Data: map[string]string{
			"components": components,
			"metadata": fmt.Sprintf("apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: %d\n  minor: %d\n  contract: v1beta1\n",
				v[0], v[1]),
		},
	}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("creating the components ConfigMap of %s: %w", p, err)
	}
	u := p.object()
	u.Object["spec"] = map[string]any{
		"version": p.Version,
		"fetchConfig": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{componentsLabel: p.Name}},
		},
	}
	if err := c.Create(ctx, u); err != nil {
		return fmt.Errorf("creating %s: %w", p, err)
	}
	return nil
}

func (p Offline) components() (string, error) {
	labels := map[string]string{"control-plane": p.Deployment}
	d := kwokDeployment(types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment}, labels, labels, p.Replicas,
		"registry.example/"+p.Name+"-controller:"+p.Version)
	out, err := yaml.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("rendering the components of %s: %w", p, err)
	}
	return string(out), nil
}

func semverMajorMinor(version string) ([2]int, error) {
	var v [3]int
	if _, err := fmt.Sscanf(version, "v%d.%d.%d", &v[0], &v[1], &v[2]); err != nil {
		return [2]int{}, fmt.Errorf("version %q is not vX.Y.Z: %w", version, err)
	}
	return [2]int{v[0], v[1]}, nil
}

// Status is what cluster-api-operator reports on a provider object.
type Status struct {
	// InstalledVersion is status.installedVersion, "" when unset.
	InstalledVersion string
	// Conditions are status.conditions by type: "True", "False", "Unknown".
	Conditions map[string]string
	// Messages are the conditions' messages by type.
	Messages map[string]string
}

// Installed reports whether cluster-api-operator says it installed the
// provider, at the version it asks for, and found its Deployment Available:
// ProviderInstalled and Ready both True.
func (s Status) Installed(version string) bool {
	return s.InstalledVersion == version && s.Conditions["ProviderInstalled"] == "True" && s.Conditions["Ready"] == "True"
}

// StatusOf reads what cluster-api-operator reports on p's provider object.
func StatusOf(ctx context.Context, c client.Client, p Provider) (Status, error) {
	u := p.object()
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return Status{}, fmt.Errorf("getting %s: %w", p, err)
	}
	s := Status{Conditions: map[string]string{}, Messages: map[string]string{}}
	s.InstalledVersion, _, _ = unstructured.NestedString(u.Object, "status", "installedVersion")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		s.Conditions[typ], _ = m["status"].(string)
		s.Messages[typ], _ = m["message"].(string)
	}
	return s, nil
}

// RemoveOffline removes providers cluster-api-operator installed while it
// is not running: each provider object (its finalizer dropped) and its
// controller Deployment, and waits until both are gone. A provider object
// left behind, say in a namespace still terminating, is found by the next
// cluster-api-operator started in the cluster, which adds its finalizer
// back and, once the object goes, deletes the provider: every cluster-scoped
// object labelled cluster.x-k8s.io/provider=<that provider>, those of
// another installation of it included (seen: the webhook configurations of
// the Cluster API core provider the test clusters run).
func RemoveOffline(ctx context.Context, c client.Client, providers []Offline) error {
	var gone []client.Object
	for _, p := range providers {
		u := p.object()
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("getting %s: %w", p, err)
		} else if err == nil && len(u.GetFinalizers()) > 0 {
			patch := client.MergeFrom(u.DeepCopy())
			u.SetFinalizers(nil)
			if err := c.Patch(ctx, u, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("releasing %s: %w", p, err)
			}
		}
		for _, o := range []client.Object{p.object(), deploymentRef(types.NamespacedName{Namespace: p.Namespace, Name: p.Deployment})} {
			if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, client.ObjectKeyFromObject(o), err)
			}
			gone = append(gone, o)
		}
	}
	for _, o := range gone {
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for %s to be gone: %w", client.ObjectKeyFromObject(o), ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

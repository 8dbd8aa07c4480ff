package installed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// admissionProbeUser may create MoveOperations in the installer's
// namespace and nothing else, while Grant waits for the policies: a
// MoveOperation of theirs that names a namespace is one the validating
// policy must refuse, since they may not read its Secrets.
const admissionProbeUser = "move-operator-admission-probe"

// waitForAdmission waits, when the MoveOperation kind is served, until the
// API server applies the installer's admission policies to MoveOperations.
// It loads each policy a moment after it is written, and each on its own:
// the mutating one may be in force while the validating one is not yet,
// and a MoveOperation created then would not have its creator's rights
// checked. So two probes, dry runs both, must answer as the policies do:
//   - with the mutating policy (Kubernetes 1.36 and later), the admin's
//     MoveOperation comes back with its creator annotated; without it,
//     one that does not name its creator is refused for that;
//   - a user who may create MoveOperations but read no Secret is refused a
//     MoveOperation of a namespace, naming the right.
func waitForAdmission(ctx context.Context, admin *rest.Config, c client.Client, namespace string, mutating bool) error {
	kind := movev1alpha1.GroupVersion.WithKind("MoveOperation")
	if _, err := c.RESTMapper().RESTMapping(kind.GroupKind()); err != nil {
		return nil // the kind is installed later; nobody creates one before
	}
	probeUser, cleanup, err := admissionProbe(ctx, admin, c, namespace)
	if err != nil {
		return err
	}
	defer cleanup()
	newProbe := func(annotations map[string]string, namespaces ...string) *unstructured.Unstructured {
		mo := &unstructured.Unstructured{}
		mo.SetGroupVersionKind(kind)
		mo.SetNamespace(namespace)
		mo.SetGenerateName("admission-probe-")
		mo.SetAnnotations(annotations)
		_ = unstructured.SetNestedField(mo.Object, "probe", "spec", "target", "kubeconfigSecretRef", "name")
		if len(namespaces) > 0 {
			_ = unstructured.SetNestedStringSlice(mo.Object, namespaces, "spec", "namespaces")
		}
		return mo
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var identified, rightsChecked bool
	var lastErr error
	for {
		if !identified {
			probe := newProbe(nil)
			err := c.Create(ctx, probe, client.DryRunAll)
			identified = mutating && err == nil && probe.GetAnnotations()[movev1alpha1.CreatedByAnnotation] != "" ||
				!mutating && apierrors.IsForbidden(err) && strings.Contains(err.Error(), movev1alpha1.CreatedByAnnotation)
			lastErr = err
		}
		if !rightsChecked {
			// The annotations the mutating policy would write, for a
			// cluster without it.
			probe := newProbe(map[string]string{
				movev1alpha1.CreatedByAnnotation:       admissionProbeUser,
				movev1alpha1.CreatedByGroupsAnnotation: "system:authenticated",
			}, "kube-system")
			err := probeUser.Create(ctx, probe, client.DryRunAll)
			rightsChecked = apierrors.IsForbidden(err) && strings.Contains(err.Error(), admissionProbeUser+" may not get secrets in namespace kube-system")
			if !rightsChecked {
				lastErr = err
			}
		}
		if identified && rightsChecked {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the installer's admission policies were not applied to MoveOperations within a minute (last answer: %v)", lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// admissionProbe grants admissionProbeUser the right to create
// MoveOperations in namespace, and returns a client that acts as them and
// what takes the right away again.
func admissionProbe(ctx context.Context, admin *rest.Config, c client.Client, namespace string) (client.Client, func(), error) {
	name := admissionProbeUser
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{movev1alpha1.GroupVersion.Group}, Resources: []string{"moveoperations"}, Verbs: []string{"create"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("granting the admission probe's user %s: %w", name, err)
		}
	}
	cleanup := func() {
		// Best effort: the probe's right only lets one create
		// MoveOperations that the policies refuse.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = errors.Join(c.Delete(ctx, binding), c.Delete(ctx, role))
	}
	probeUser, err := client.New(Impersonating(admin, name), client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("creating a client for the admission probe's user: %w", err)
	}
	return probeUser, cleanup, nil
}

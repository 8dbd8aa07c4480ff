package installed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/targetaccess"
)

// AllowRestores gives the operator's ServiceAccount (namespace/name), in
// the cluster config reaches, the rights of a move's target there, as
// docs/disaster-recovery.md tells users to: dist/target-access.yaml (root:
// the checkout's root) applied, and its ClusterRole move-operator-target
// bound to the ServiceAccount. It returns the binding's removal.
func AllowRestores(ctx context.Context, config *rest.Config, root, namespace, serviceAccount string) (func(), error) {
	manifest, err := os.ReadFile(filepath.Join(root, TargetAccessPath))
	if err != nil {
		return nil, err
	}
	if _, _, err := targetaccess.Grant(ctx, config, manifest, targetaccess.Options{}); err != nil {
		return nil, fmt.Errorf("applying %s: %w", TargetAccessPath, err)
	}
	c, err := client.New(config, client.Options{})
	if err != nil {
		return nil, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "move-operator-restore-" + rand.String(4)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "move-operator-target"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: serviceAccount}},
	}
	if err := c.Create(ctx, crb); err != nil {
		return nil, fmt.Errorf("binding move-operator-target to ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	return func() { _ = c.Delete(context.Background(), crb) }, nil
}

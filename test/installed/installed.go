package installed

import (
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/move-operator/move-operator/internal/targetaccess"
)

// InstallPath is where the installer lives, relative to the repository root,
// and TargetAccessPath the target's side of the operator's access (the
// manifest `manager target-access` applies to the target).
const (
	InstallPath      = "dist/install.yaml"
	TargetAccessPath = "dist/target-access.yaml"
)

// ManagerContainer is the name of the operator's container in its Deployment.
const ManagerContainer = "manager"

// Install is dist/install.yaml as read from the repository.
type Install struct {
	// Objects are the file's documents, in order.
	Objects []*unstructured.Unstructured
	// Deployment is the operator's Deployment.
	Deployment *appsv1.Deployment

	raw []byte
}

// Read reads dist/install.yaml from the repository at root.
func Read(root string) (*Install, error) {
	data, err := os.ReadFile(filepath.Join(root, InstallPath))
	if err != nil {
		return nil, fmt.Errorf("reading the installer: %w", err)
	}
	m, err := targetaccess.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", InstallPath, err)
	}
	in := &Install{Objects: m.Objects, raw: data}
	for _, o := range m.Objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		if in.Deployment != nil {
			return nil, fmt.Errorf("%s holds more than one Deployment (%s and %s): which one is the operator?", InstallPath, in.Deployment.Name, o.GetName())
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			return nil, fmt.Errorf("%s: Deployment %s: %w", InstallPath, o.GetName(), err)
		}
		in.Deployment = d
	}
	if in.Deployment == nil {
		return nil, fmt.Errorf("%s holds no Deployment", InstallPath)
	}
	if _, err := in.Manager(); err != nil {
		return nil, err
	}
	return in, nil
}

// Manager returns the Deployment's manager container.
func (in *Install) Manager() (*corev1.Container, error) {
	for i := range in.Deployment.Spec.Template.Spec.Containers {
		if c := &in.Deployment.Spec.Template.Spec.Containers[i]; c.Name == ManagerContainer {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s: Deployment %s has no container %q", InstallPath, in.Deployment.Name, ManagerContainer)
}

// ServiceAccount is the namespace and name of the ServiceAccount the
// operator's pods run as.
func (in *Install) ServiceAccount() (namespace, name string) {
	return in.Deployment.Namespace, in.Deployment.Spec.Template.Spec.ServiceAccountName
}

// identityKinds are the documents that make up the operator's identity and
// rights, and who may direct them (the admission policies that hold a
// MoveOperation to its creator's rights): everything a test applies for
// it, and nothing that runs.
var identityKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true,
	"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
}

// IdentityObjects are the Namespace, ServiceAccount, RBAC and admission
// policy documents.
func (in *Install) IdentityObjects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range in.Objects {
		if identityKinds[o.GetKind()] {
			out = append(out, o.DeepCopy())
		}
	}
	return out
}

package targetaccess

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Secret returns the Secret that holds a target kubeconfig under key
// (movev1alpha1.DefaultKubeconfigSecretKey when empty), as a MoveOperation's
// spec.target.kubeconfigSecretRef names it.
func Secret(namespace, name, key string, kubeconfig []byte) *corev1.Secret {
	key = movev1alpha1.SecretKeyReference{Name: name, Key: key}.KeyOrDefault()
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{key: kubeconfig},
	}
}

// WriteSecret creates the Secret holding the target kubeconfig in the
// source cluster, or, when it exists, sets the kubeconfig under key
// (movev1alpha1.DefaultKubeconfigSecretKey when empty) and leaves the rest
// of it as it is: its other keys, and the finalizers a running move holds
// it by. Replacing the kubeconfig of a running move is how its credential
// is rotated.
func WriteSecret(ctx context.Context, source client.Client, namespace, name, key string, kubeconfig []byte) error {
	if namespace == "" || name == "" {
		return errors.New("writing the target kubeconfig Secret: its namespace and name are required")
	}
	if len(kubeconfig) == 0 {
		return errors.New("writing the target kubeconfig Secret: the kubeconfig is empty")
	}
	want := Secret(namespace, name, key, kubeconfig)
	err := source.Create(ctx, want)
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating Secret %s/%s in the source: %w", namespace, name, err)
	}
	existing := &corev1.Secret{}
	if err := source.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, existing); err != nil {
		return fmt.Errorf("reading Secret %s/%s in the source: %w", namespace, name, err)
	}
	patch := client.MergeFrom(existing.DeepCopy())
	if existing.Data == nil {
		existing.Data = map[string][]byte{}
	}
	for k, v := range want.Data {
		existing.Data[k] = v
	}
	if err := source.Patch(ctx, existing, patch); err != nil {
		return fmt.Errorf("updating Secret %s/%s in the source: %w", namespace, name, err)
	}
	return nil
}

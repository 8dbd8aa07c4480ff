package creator

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/access"
)

// groupSeparator joins the creator's groups in CreatedByGroupsAnnotation.
const groupSeparator = ","

// ErrUnknown is returned by Of for an object that does not say who created
// it.
var ErrUnknown = fmt.Errorf("the MoveOperation does not say who created it: annotation %s is missing", movev1alpha1.CreatedByAnnotation)

// Of returns the creator an object's annotations name. The annotations
// are only as good as the admission policy that wrote or checked them:
// Verify first.
func Of(obj metav1.Object) (access.User, error) {
	a := obj.GetAnnotations()
	name, ok := a[movev1alpha1.CreatedByAnnotation]
	if !ok || name == "" {
		return access.User{}, ErrUnknown
	}
	u := access.User{Name: name}
	if groups := a[movev1alpha1.CreatedByGroupsAnnotation]; groups != "" {
		u.Groups = strings.Split(groups, groupSeparator)
	}
	return u, nil
}

// Annotate writes who creates obj on it, as the admission policy wants
// the annotations of a creator that writes them itself (an API server
// without the MutatingAdmissionPolicy): exactly the requester's username
// and groups.
func Annotate(obj metav1.Object, username string, groups []string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[movev1alpha1.CreatedByAnnotation] = username
	a[movev1alpha1.CreatedByGroupsAnnotation] = strings.Join(groups, groupSeparator)
	obj.SetAnnotations(a)
}

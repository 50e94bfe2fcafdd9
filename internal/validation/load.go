package validation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
)

// LoadCatalog reads every registration (from a cache, in a manager): there
// are few, one per quotable resource type.
func LoadCatalog(ctx context.Context, r client.Reader) (*Catalog, error) {
	var regs quotav1alpha1.ResourceRegistrationList
	if err := r.List(ctx, &regs); err != nil {
		return nil, err
	}
	return NewCatalog(regs.Items), nil
}

// GetNamespace returns the namespace a claim is judged against
// (ValidateClaim), or nil if it does not exist.
func GetNamespace(ctx context.Context, r client.Reader, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return ns, nil
}

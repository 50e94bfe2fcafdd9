package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every quotakeeper kind.
	GroupVersion = schema.GroupVersion{Group: "quota.miloapis.com", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion by the name the Kubernetes code
	// generators' clientset and listers (api/client) use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the kinds of this package with a
	// runtime.Scheme. It is apimachinery's, not controller-runtime's
	// (kubebuilder's scheme.Builder), so that an owning service importing
	// the API types pulls in no controller framework.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// kinds are the objects each types file registers from its init.
	kinds []runtime.Object
)

// register adds objects to the kinds AddToScheme adds.
func register(objs ...runtime.Object) { kinds = append(kinds, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, kinds...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Resource is the group-qualified resource of ours named resource (the
// listers' not-found errors use it).
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

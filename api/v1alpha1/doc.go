// Package v1alpha1 holds the quota.miloapis.com/v1alpha1 API types.
// +kubebuilder:object:generate=true
// +groupName=quota.miloapis.com
// +groupGoName=Quota
package v1alpha1

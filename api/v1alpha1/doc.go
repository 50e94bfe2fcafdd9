// Package v1alpha1 holds the quota.miloapis.com/v1alpha1 API types.
// +kubebuilder:object:generate=true
// +groupName=quota.miloapis.com
package v1alpha1

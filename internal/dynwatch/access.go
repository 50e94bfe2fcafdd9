package dynwatch

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountedKindsRole is the aggregated ClusterRole through which the manager
// reads the kinds known only at run time (config/rbac/counted_kinds.yaml),
// and AggregateLabel the label that adds a ClusterRole's rules to it.
const (
	CountedKindsRole = "quotakeeper-manager-counted-kinds"
	AggregateLabel   = "quota.miloapis.com/aggregate-to-manager"
)

// readVerbs are what an informer and a live read of a kind need.
var readVerbs = []string{"get", "list", "watch"}

// ForbiddenError says which verbs on a kind this process may not use, and
// what to add so that it may.
type ForbiddenError struct {
	Resource string // resource.group, e.g. "secrets" or "deployments.apps"
	Verbs    []string
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("the manager may not %s %s: add a ClusterRole labelled %s=\"true\" granting get, list and watch on it (it aggregates into %s)",
		strings.Join(e.Verbs, ", "), e.Resource, AggregateLabel, CountedKindsRole)
}

// CheckRead asks the API server (a SelfSubjectAccessReview per verb, which
// every authenticated user may make) whether this process may get, list and
// watch mapping's resource in every namespace. An informer on a kind it may
// not list retries its list forever and never syncs; asking first lets the
// caller say so at once, and keep the kind out of its view.
func CheckRead(ctx context.Context, c client.Client, mapping *meta.RESTMapping) error {
	var denied []string
	for _, verb := range readVerbs {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource,
			},
		}}
		if err := c.Create(ctx, r); err != nil {
			return fmt.Errorf("access review of %s %s: %w", verb, mapping.Resource.GroupResource(), err)
		}
		if !r.Status.Allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		return &ForbiddenError{Resource: mapping.Resource.GroupResource().String(), Verbs: denied}
	}
	return nil
}

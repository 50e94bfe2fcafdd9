package controllers

// Serves every controller: the cache indexes they look objects up by.

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotakeeper/quotakeeper/api/v1alpha1"
	"github.com/quotakeeper/quotakeeper/internal/celpolicy"
	"github.com/quotakeeper/quotakeeper/internal/ledger"
	"github.com/quotakeeper/quotakeeper/internal/ledgerconv"
)

// Cache indexes. Every lookup a reconciler makes by something other than
// name goes through one of these, so no reconcile lists a whole kind.
const (
	// indexBucketPair: buckets by consumer and resource type (pairKey).
	indexBucketPair = "quota.miloapis.com/bucket-pair"
	// indexGrantResourceType: grants by each resource type they allow.
	indexGrantResourceType = "quota.miloapis.com/grant-resource-type"
	// indexEffectivePair: effective grants by consumer and resource type.
	indexEffectivePair = "quota.miloapis.com/effective-pair"
	// indexPolicyResourceType: creation policies by each resource type
	// their template names literally.
	indexPolicyResourceType = "quota.miloapis.com/policy-resource-type"
	// indexGrantDelegation: delegated grants by the name of each
	// delegation bucket they hand out from (delegation.Key).
	indexGrantDelegation = "quota.miloapis.com/grant-delegation"
	// indexGrantPolicy: grants by the GrantCreationPolicy that made them.
	indexGrantPolicy = "quota.miloapis.com/grant-policy"
	// indexGrantPolicyTrigger: grants by the policy that made them and
	// the uid of their trigger (policyTriggerKey).
	indexGrantPolicyTrigger = "quota.miloapis.com/grant-policy-trigger"
)

// policyTriggerKey names a policy and a trigger uid in index values; "|"
// is in neither.
func policyTriggerKey(policy, uid string) string { return policy + "|" + uid }

// pairKey names a consumer and resource type in index values. Fields are
// joined with "|", which none of them can contain (kinds, groups and names
// are DNS-like; the resource type comes last).
func pairKey(c ledger.Consumer, resourceType string) string {
	return fmt.Sprintf("%s|%s|%s|%s|%s", c.APIGroup, c.Kind, c.Namespace, c.Name, resourceType)
}

func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj  client.Object
		name string
		fn   client.IndexerFunc
	}{
		{&quotav1alpha1.AllowanceBucket{}, indexBucketPair, func(o client.Object) []string {
			b := o.(*quotav1alpha1.AllowanceBucket)
			return []string{pairKey(ledgerconv.Consumer(b.Spec.ConsumerRef), b.Spec.ResourceType)}
		}},
		{&quotav1alpha1.ResourceGrant{}, indexGrantDelegation, func(o client.Object) []string {
			var out []string
			for _, k := range keysOf(o) {
				out = append(out, k.Name())
			}
			return out
		}},
		{&quotav1alpha1.ResourceGrant{}, indexGrantResourceType, func(o client.Object) []string {
			var out []string
			for _, a := range o.(*quotav1alpha1.ResourceGrant).Spec.Allowances {
				out = append(out, a.ResourceType)
			}
			return out
		}},
		{&quotav1alpha1.ResourceGrant{}, indexGrantPolicy, func(o client.Object) []string {
			if p := o.GetLabels()[quotav1alpha1.LabelPolicy]; p != "" {
				return []string{p}
			}
			return nil
		}},
		{&quotav1alpha1.ResourceGrant{}, indexGrantPolicyTrigger, func(o client.Object) []string {
			p, uid := o.GetLabels()[quotav1alpha1.LabelPolicy], o.GetLabels()[quotav1alpha1.LabelTriggerUID]
			if p == "" || uid == "" {
				return nil
			}
			return []string{policyTriggerKey(p, uid)}
		}},
		{&quotav1alpha1.EffectiveResourceGrant{}, indexEffectivePair, func(o client.Object) []string {
			e := o.(*quotav1alpha1.EffectiveResourceGrant)
			return []string{pairKey(ledgerconv.Consumer(e.Spec.ConsumerRef), e.Spec.ResourceType)}
		}},
		{&quotav1alpha1.GrantCreationPolicy{}, indexPolicyResourceType, func(o client.Object) []string {
			var out []string
			for _, a := range o.(*quotav1alpha1.GrantCreationPolicy).Spec.Target.ResourceGrantTemplate.Spec.Allowances {
				out = appendLiteral(out, a.ResourceType)
			}
			return out
		}},
		{&quotav1alpha1.ClaimCreationPolicy{}, indexPolicyResourceType, func(o client.Object) []string {
			var out []string
			for _, r := range o.(*quotav1alpha1.ClaimCreationPolicy).Spec.Target.ResourceClaimTemplate.Spec.Requests {
				out = appendLiteral(out, r.ResourceType)
			}
			return out
		}},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.name, ix.fn); err != nil {
			return fmt.Errorf("index %s: %w", ix.name, err)
		}
	}
	return nil
}

// appendLiteral appends a resource type a template names literally; a
// templated one names no registration until rendered.
func appendLiteral(out []string, rt string) []string {
	if celpolicy.IsTemplate(rt) {
		return out
	}
	return append(out, rt)
}

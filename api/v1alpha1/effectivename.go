package v1alpha1

import "github.com/quotakeeper/quotakeeper/api/names"

// effectiveNames name effective grants: readable from the resource type,
// unique from a hash of the consumer and resource type.
var effectiveNames = names.Scheme{Tag: "quotakeeper.effective/v1", Fallback: "effective", PrefixMax: 40, HashBytes: 8}

// EffectiveResourceGrantName is the name of consumer c's
// EffectiveResourceGrant for resourceType, the same in every namespace it
// is kept in. It is deterministic so that the controller finds what it made
// and a quota denial can name the object that shows the numbers.
func EffectiveResourceGrantName(c ConsumerRef, resourceType string) string {
	return effectiveNames.Name(resourceType, c.APIGroup, c.Kind, c.Namespace, c.Name, resourceType)
}

# QuotaClaimPolicy enforces the ClaimCreationPolicy named by
# parameters.policy: quota.policy_claim evaluates its conditions and renders
# its claim template (CEL) for the object, and lib.quota reserves the
# rendered requests as one claim, all or nothing. A CREATE (or an audit of
# an existing object) claims what the policy renders; an UPDATE claims what
# grows, bucket by bucket, between the policy rendered for the old object
# and for the new one.
package quotaclaimpolicy

import data.lib.quota as quotalib

render(o, request) := quota.policy_claim({
	"policy": quotalib.params.policy,
	"generation": object.get(quotalib.params, "generation", 0),
	"object": o,
	"namespace": namespace_of(o),
	"request": request,
})

# The namespace the rendered claim is made in, which quota.policy_claim
# judges it by as the claim webhook judges a ResourceClaim there: that
# namespace must belong to the consumer the policy renders, so a tenant
# cannot charge another tenant's quota by writing the field a policy reads
# its consumer from. A Namespace is its own; any other object's comes with
# its labels when Gatekeeper knows them (name "" for a cluster-scoped one).
namespace_of(o) := {"name": object.get(o, ["metadata", "name"], ""), "labels": object.get(o, ["metadata", "labels"], {})} if {
	quotalib.is_namespace_object
} else := {"name": quotalib.namespace_name, "labels": labels} if {
	labels := quotalib.namespace_labels
} else := {"name": quotalib.namespace_name}

# What the policy renders for this review; undefined when the review claims
# nothing (a DELETE or CONNECT), so a policy's CEL is never evaluated for it.
rendered := render(quotalib.obj, object.filter(quotalib.review, ["operation", "userInfo", "resource", "subResource", "namespace", "name", "dryRun"])) if {
	claims
}

claims if quotalib.operation == "CREATE"

claims if quotalib.mode == "audit"

# An UPDATE renders the policy for the new object and for the old one as the
# manager's observer renders it for a live object (a CREATE of it, with no
# user), since what the observer counts is what the update must reserve
# for: without this, a ConfigMap created at 1 byte and patched to 40 was
# counted at 40 under a limit of 8 (issue 22, case 4).
rendered_new := render(quotalib.obj, observed_request) if grows

rendered_old := render(quotalib.old_obj, observed_request) if grows

grows if {
	quotalib.operation == "UPDATE"
	quotalib.mode in {"reserve", "check"}
}

observed_request := object.union(
	object.filter(quotalib.review, ["resource", "namespace", "name"]),
	{"operation": "CREATE"},
)

# What the old object counted: nothing when the policy did not apply to it
# or cannot render it any more (then the whole new amount is reserved).
old_requests := rendered_old.claim.requests if {
	rendered_old.applies
} else := []

# The renders a review asks for (never the old object's: what it counted
# cannot stop the update).
renders contains rendered

renders contains rendered_new

violation contains v if {
	claims_or_grows
	not is_string(object.get(quotalib.params, "policy", null))
	v := quotalib.config_violation("parameters.policy: required")
}

claims_or_grows if claims

claims_or_grows if grows

# The policy cannot decide (a CEL error for this object, not found): deny
# with its message, as a violation of this constraint only.
violation contains quotalib.config_violation(r.error) if {
	some r in renders
	r.error
}

# The policy could not be asked (the stock-Gatekeeper form of the builtins
# answers the reason as a string: lib.quota's undecided).
violation contains quotalib.undecided(r) if {
	some r in renders
	is_string(r)
}

violation contains v if {
	rendered.applies
	some v in quotalib.claim_violations(rendered.claim.requests, rendered.claim.metadata)
}

violation contains v if {
	rendered_new.applies
	some v in quotalib.growth_violations(rendered_new.claim.requests, old_requests, rendered_new.claim.metadata)
}

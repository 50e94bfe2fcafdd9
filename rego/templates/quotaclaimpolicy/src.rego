# QuotaClaimPolicy enforces the ClaimCreationPolicy named by
# parameters.policy: quota.policy_claim evaluates its conditions and renders
# its claim template (CEL) for the object, and lib.quota reserves the
# rendered requests as one claim, all or nothing. Only a CREATE (or an audit
# of an existing object) claims, as with QuotaEntity.
package quotaclaimpolicy

import data.lib.quota as quotalib

# What the policy renders for this review; undefined when the review claims
# nothing (an UPDATE, DELETE or CONNECT), so a policy's CEL is never
# evaluated for it.
rendered := quota.policy_claim({
	"policy": quotalib.params.policy,
	"generation": object.get(quotalib.params, "generation", 0),
	"object": quotalib.obj,
	"request": object.filter(quotalib.review, ["operation", "userInfo", "resource", "subResource", "namespace", "name", "dryRun"]),
}) if {
	claims
}

claims if quotalib.operation == "CREATE"

claims if quotalib.mode == "audit"

violation contains v if {
	claims
	not is_string(object.get(quotalib.params, "policy", null))
	v := quotalib.config_violation("parameters.policy: required")
}

# The policy cannot decide (a CEL error for this object, not found): deny
# with its message, as a violation of this constraint only.
violation contains quotalib.config_violation(rendered.error) if rendered.error

violation contains v if {
	rendered.applies
	some v in quotalib.claim_violations(rendered.claim.requests, rendered.claim.metadata)
}

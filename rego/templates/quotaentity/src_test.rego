package quotaentity_test

import data.quotaentity

cm := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team-a", "uid": "uid-cm"}}

review(op) := {"uid": "req-1", "operation": op, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"}, "object": cm, "oldObject": cm}

refused(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 3, "allocated": 0, "reserved": 3, "available": 0,
	"message": sprintf("requested %d of %s", [claim.requests[0].amount, claim.requests[0].resourceType]),
})]}

test_create_counts_one if {
	msgs := {v.msg | some v in quotaentity.violation} with input as {"review": review("CREATE"), "parameters": {"resourceType": "core/configmaps"}}
		with quota.reserve as refused
	msgs == {"quota exceeded for Namespace team-a: requested 1 of core/configmaps; see kubectl quota usage -n team-a"}
}

test_update_counts_nothing if {
	vs := quotaentity.violation with input as {"review": review("UPDATE"), "parameters": {"resourceType": "core/configmaps"}}
		with quota.reserve as refused
	count(vs) == 0
}

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

# parameters.labelSelector (issue 22, case 6): an update that labels an
# object into scope is charged like a create, as 0 -> 1 under the id of an
# update's growth with its total; one already in scope, or still out of it,
# counts nothing new; a create out of scope counts nothing.
labelled(o, l) := json.patch(o, [{"op": "add", "path": "/metadata/labels", "value": l}])

scoped := {"resourceType": "core/configmaps", "labelSelector": {"matchLabels": {"quota": "counted"}}}

scoped_review(op, new, old) := object.union(review(op), {"object": new, "oldObject": old})

refused_with_id(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 2, "allocated": 2, "reserved": 0, "available": 0,
	"message": sprintf("%s requested %d total %d", [claim.id, claim.requests[0].amount, claim.requests[0].total]),
})]}

test_labelling_into_scope_is_charged_like_a_create if {
	r := scoped_review("UPDATE", labelled(cm, {"quota": "counted"}), cm)
	msgs := {v.msg | some v in quotaentity.violation} with input as {"review": r, "parameters": scoped}
		with quota.reserve as refused_with_id
	msgs == {"quota exceeded for Namespace team-a: uid-cm/0/1 requested 1 total 1; see kubectl quota usage -n team-a"}
}

test_updates_within_or_outside_scope_and_creates_outside_count_nothing if {
	inside := labelled(cm, {"quota": "counted"})
	every r in [
		scoped_review("UPDATE", labelled(inside, {"quota": "counted", "app": "web"}), inside),
		scoped_review("UPDATE", labelled(cm, {"app": "web"}), cm),
		scoped_review("UPDATE", cm, inside),
		scoped_review("CREATE", cm, null),
	] {
		count(quotaentity.violation) == 0 with input as {"review": r, "parameters": scoped} with quota.reserve as refused_with_id
	}
}

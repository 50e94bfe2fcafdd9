package quotaentity_test

import data.quotaentity

cm := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team-a", "uid": "uid-cm"}}

review(op) := {"uid": "req-1", "operation": op, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"}, "object": cm, "oldObject": cm}

# quota.review replaced: the facts it was given, as a violation (what it
# decides from them is tested in Go: internal/builtins/review_test.go).
reported(f, c) := [{
	"msg": sprintf("%s %s %v -> %v labels %v from %v", [f.review.operation, o.metadata.uid, c.oldAmount, c.amount, labels(o), labels(f.review.oldObject)]),
	"details": {},
}] if {
	o := f.review.object
}

labels(o) := object.get(o, ["metadata", "labels"], {})

test_create_counts_one if {
	msgs := {v.msg | some v in quotaentity.violation} with input as {"review": review("CREATE"), "parameters": {"resourceType": "core/configmaps"}}
		with quota.review as reported
	msgs == {"CREATE uid-cm 1 -> 1 labels {} from {}"}
}

# The real quota.review: an update grows nothing, so nothing is asked of the ledger.
test_update_counts_nothing if {
	vs := quotaentity.violation with input as {"review": review("UPDATE"), "parameters": {"resourceType": "core/configmaps"}}
	count(vs) == 0
}

# parameters.labelSelector (issue 22, case 6): quota.review gets the
# object's labels before and after an update, so an update that labels an
# object into scope is charged like a create (review_test.go); with the real
# quota.review, one already in scope, or still out of it, counts nothing new,
# and a create out of scope counts nothing.
labelled(o, l) := json.patch(o, [{"op": "add", "path": "/metadata/labels", "value": l}])

scoped := {"resourceType": "core/configmaps", "labelSelector": {"matchLabels": {"quota": "counted"}}}

scoped_review(op, new, old) := object.union(review(op), {"object": new, "oldObject": old})

test_labelling_into_scope_is_charged_like_a_create if {
	r := scoped_review("UPDATE", labelled(cm, {"quota": "counted"}), cm)
	msgs := {v.msg | some v in quotaentity.violation} with input as {"review": r, "parameters": scoped}
		with quota.review as reported
	msgs == {`UPDATE uid-cm 1 -> 1 labels {"quota": "counted"} from {}`}
}

test_updates_within_or_outside_scope_and_creates_outside_count_nothing if {
	inside := labelled(cm, {"quota": "counted"})
	every r in [
		scoped_review("UPDATE", labelled(inside, {"quota": "counted", "app": "web"}), inside),
		scoped_review("UPDATE", labelled(cm, {"app": "web"}), cm),
		scoped_review("UPDATE", cm, inside),
		scoped_review("CREATE", cm, null),
	] {
		count(quotaentity.violation) == 0 with input as {"review": r, "parameters": scoped}
	}
}

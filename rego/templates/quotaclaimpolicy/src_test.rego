package quotaclaimpolicy_test

import data.quotaclaimpolicy

cm := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "team-a", "uid": "uid-settings"}}

review(op) := {
	"uid": "req-1", "operation": op, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
	"resource": {"group": "", "version": "v1", "resource": "configmaps"},
	"name": "settings", "namespace": "team-a",
	"userInfo": {"username": "alice", "groups": ["devs"]},
	"object": cm, "oldObject": cm,
}

params := {"policy": "configmaps", "generation": 3}

team_a := {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""}

rendered := {"applies": true, "claim": {
	"requests": [
		{"consumer": team_a, "resourceType": "core/configmaps", "amount": 1, "dimensions": {}},
		{"consumer": team_a, "resourceType": "core/configmap-bytes", "amount": 5, "dimensions": {}},
	],
	"metadata": {"name": "settings-claim", "labels": {"team": "a"}},
}}

# Reports its argument as an error, to assert what the template asks.
asked(req) := {"error": sprintf("%s@%d %s %s %s %v", [
	req.policy, req.generation, req.object.metadata.name,
	req.request.operation, req.request.userInfo.username, sort(object.keys(req.request)),
])}

# quota.review replaced: a violation per request it was given to claim, or
# to grow from (old), so a test sees what the template asked; what it
# reserves for them is tested in Go (internal/builtins/review_test.go).
reported(_, c) := array.concat(
	[{"msg": sprintf("%s %s %d as %v", [k, r.resourceType, r.amount, c[k].metadata]), "details": {}} |
		some k in ["claim", "growth"]
		some r in c[k].requests
	],
	[{"msg": sprintf("old %s %d", [r.resourceType, r.amount]), "details": {}} |
		some r in object.get(c, ["growth", "oldRequests"], [])
	],
)

test_create_asks_the_policy_with_the_object_and_the_request if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": review("CREATE"), "parameters": params}
		with quota.policy_claim as asked
		with quota.review as reported
	got == {`quota: configmaps@3 settings CREATE alice ["name", "namespace", "operation", "resource", "userInfo"]`}
}

test_create_reserves_the_rendered_requests_as_one_claim_with_its_metadata if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": review("CREATE"), "parameters": params}
		with quota.policy_claim as rendered
		with quota.review as reported
	got == {
		`claim core/configmaps 1 as {"labels": {"team": "a"}, "name": "settings-claim"}`,
		`claim core/configmap-bytes 5 as {"labels": {"team": "a"}, "name": "settings-claim"}`,
	}
}

test_a_policy_that_does_not_apply_claims_nothing if {
	vs := quotaclaimpolicy.violation with input as {"review": review("CREATE"), "parameters": params}
		with quota.policy_claim as {"applies": false}
		with quota.review as reported
	count(vs) == 0
}

test_a_policy_error_denies_with_its_message if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": review("CREATE"), "parameters": params}
		with quota.policy_claim as {"error": `ClaimCreationPolicy "configmaps": spec.target...: no such key: payload`}
		with quota.review as reported
	got == {`quota: ClaimCreationPolicy "configmaps": spec.target...: no such key: payload`}
}

test_deletes_and_connects_claim_nothing_and_evaluate_no_policy if {
	every op in ["DELETE", "CONNECT"] {
		vs := quotaclaimpolicy.violation with input as {"review": review(op), "parameters": params}
			with quota.policy_claim as {"error": "must not be called"}
			with quota.review as reported
		count(vs) == 0
	}
}

test_a_create_without_a_uid_is_denied if {
	no_uid := json.remove(review("CREATE"), ["object/metadata/uid"])
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": no_uid, "parameters": params}
		with quota.policy_claim as rendered
	got == {`quota: cannot reserve for ConfigMap "settings": metadata.uid is empty (the API server sets it before validating admission)`}
}

# Reports the namespace the template asks the claim to be judged by.
asked_namespace(req) := {"error": sprintf("%v", [req.namespace])}

team_a_namespace := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"resourcemanager.miloapis.com/organization": "acme"}}}

test_the_claim_is_judged_by_the_namespace_gatekeeper_attaches if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": object.union(review("CREATE"), {"namespaceObject": team_a_namespace}), "parameters": params}
		with quota.policy_claim as asked_namespace
		with quota.review as reported
	got == {`quota: {"labels": {"resourcemanager.miloapis.com/organization": "acme"}, "name": "team-a"}`}
}

test_a_namespace_gatekeeper_does_not_know_has_no_labels if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": review("CREATE"), "parameters": params}
		with quota.policy_claim as asked_namespace
		with quota.review as reported
	got == {`quota: {"name": "team-a"}`}
}

test_a_namespace_is_judged_by_its_own_labels if {
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c", "uid": "uid-c", "labels": {"team": "c"}}}
	r := object.union(review("CREATE"), {"kind": {"group": "", "version": "v1", "kind": "Namespace"}, "name": "team-c", "namespace": "", "object": ns})
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": r, "parameters": params}
		with quota.policy_claim as asked_namespace
		with quota.review as reported
	got == {`quota: {"labels": {"team": "c"}, "name": "team-c"}`}
}

test_a_missing_policy_parameter_is_a_violation if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": review("CREATE"), "parameters": {}}
		with quota.policy_claim as rendered
		with quota.review as reported
	got == {"quota: parameters.policy: required"}
}

# An UPDATE renders the policy for the old and the new object as the
# observer does (a CREATE, no user) and reserves what grows, per bucket,
# with the new amount as total; a bucket that shrinks or stays reserves
# nothing (issue 22, case 4).
payload(n) := json.patch(cm, [{"op": "add", "path": "/data", "value": {"payload": concat("", [c | some _ in numbers.range(1, n); c := "x"])}}])

bytes_of(req) := {"applies": true, "claim": {
	"requests": [
		{"consumer": team_a, "resourceType": "core/configmaps", "amount": 1, "dimensions": {}},
		{"consumer": team_a, "resourceType": "core/configmap-bytes", "amount": count(req.object.data.payload), "dimensions": {}},
	],
	"metadata": {"name": "settings-claim"},
}}

asked_update(req) := {"error": sprintf("%s %s %v %d", [req.request.operation, object.get(req.request, ["userInfo", "username"], "nobody"), sort(object.keys(req.request)), count(req.object.data.payload)])}

update_review(old_n, new_n) := object.union(review("UPDATE"), {"object": payload(new_n), "oldObject": payload(old_n)})

test_an_update_renders_the_new_object_as_the_observer_does if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": update_review(1, 40), "parameters": params}
		with quota.policy_claim as asked_update
		with quota.review as reported
	got == {`quota: CREATE nobody ["name", "namespace", "operation", "resource"] 40`}
}

test_an_update_reserves_what_grows_with_its_total if {
	got := {v.msg | some v in quotaclaimpolicy.violation} with input as {"review": update_review(1, 40), "parameters": params}
		with quota.policy_claim as bytes_of
		with quota.review as reported
	got == {
		`growth core/configmaps 1 as {"name": "settings-claim"}`,
		`growth core/configmap-bytes 40 as {"name": "settings-claim"}`,
		"old core/configmaps 1",
		"old core/configmap-bytes 1",
	}
}

test_an_update_that_shrinks_or_keeps_reserves_nothing if {
	every n in [40, 12] {
		vs := quotaclaimpolicy.violation with input as {"review": update_review(40, n), "parameters": params}
			with quota.policy_claim as bytes_of
		count(vs) == 0
	}
}

package quotaallocation_test

import data.quotaallocation

# The apiserver bumps metadata.generation on a spec change, before admission.
deployment(replicas) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "generation": replicas},
	"spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}}},
}

params := {"resourceType": "core/requests.cpu", "amount": {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"}}

# Reports what it was asked to reserve, as a refusal.
echo(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 0, "allocated": 0, "reserved": 0, "available": 0,
	"message": sprintf("reserve %s %d", [claim.id, claim.requests[0].amount]),
})]}

review(op, new, old) := {"uid": "req-2", "operation": op, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "object": new, "oldObject": old}

test_create_reserves_replicas_times_requests if {
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": review("CREATE", deployment(3), null), "parameters": params}
		with quota.reserve as echo
	msgs == {"quota exceeded for Namespace team-a: reserve uid-web 1500"}
}

test_update_reserves_the_growth_from_the_old_object_under_the_new_generation_and_growth if {
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": review("UPDATE", deployment(4), deployment(3)), "parameters": params}
		with quota.reserve as echo
	msgs == {"quota exceeded for Namespace team-a: reserve uid-web/4/500 500"}
}

test_scaling_down_reserves_nothing if {
	vs := quotaallocation.violation with input as {"review": review("UPDATE", deployment(2), deployment(3)), "parameters": params}
		with quota.reserve as echo
	count(vs) == 0
}

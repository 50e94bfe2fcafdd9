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

# quota.review replaced: the facts it was given (the kind and object
# counted, a Scale's workload's, the object's uid and generation, the
# amounts), as a violation; what it reserves for them is tested in Go
# (internal/builtins/review_test.go).
reported(f, c) := [{
	"msg": sprintf("%s %s/%s %s gen %v: %v -> %v", [f.review.operation, k.apiGroup, k.kind, m.uid, object.get(m, "generation", 0), c.oldAmount, c.amount]),
	"details": {},
}] if {
	k := counted_kind(f)
	m := counted_object(f).metadata
}

counted_kind(f) := f.scale.kind if {
	f.scale != null
} else := {"apiGroup": f.review.kind.group, "kind": f.review.kind.kind}

counted_object(f) := f.scale.object if {
	f.scale != null
} else := f.review.object

review(op, new, old) := {"uid": "req-2", "operation": op, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "object": new, "oldObject": old}

test_create_reserves_replicas_times_requests if {
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": review("CREATE", deployment(3), null), "parameters": params}
		with quota.review as reported
	msgs == {"CREATE apps/Deployment uid-web gen 3: 0 -> 1500"}
}

test_update_reserves_the_growth_from_the_old_object_under_the_new_generation_and_growth if {
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": review("UPDATE", deployment(4), deployment(3)), "parameters": params}
		with quota.review as reported
	msgs == {"UPDATE apps/Deployment uid-web gen 4: 1500 -> 2000"}
}

# A kind without metadata.generation (a ConfigMap) keeps generation 0
# through every update: the total (what it counts once the update is in
# place) is what holds the reservation until the observer counts it there.
units(n) := {
	"apiVersion": "v1", "kind": "ConfigMap",
	"metadata": {"name": "a", "namespace": "team-a", "uid": "uid-a", "annotations": {"units": sprintf("%d", [n])}},
}

test_update_of_a_kind_without_generation_reserves_the_growth_with_its_total if {
	p := {"resourceType": "e2e/units", "amount": {"path": ["metadata", "annotations", "units"]}}
	r := {"uid": "req-4", "operation": "UPDATE", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"}, "object": units(9), "oldObject": units(1)}
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": r, "parameters": p}
		with quota.review as reported
	msgs == {"UPDATE /ConfigMap uid-a gen 0: 1 -> 9"}
}

# The real quota.review: nothing grows, nothing is asked of the ledger.
test_scaling_down_reserves_nothing if {
	vs := quotaallocation.violation with input as {"review": review("UPDATE", deployment(2), deployment(3)), "parameters": params}
	count(vs) == 0
}

# kubectl scale: an autoscaling/v1 Scale carrying the workload's name,
# namespace, uid and resourceVersion, reviewed against the synced workload.
scale(replicas) := {
	"apiVersion": "autoscaling/v1",
	"kind": "Scale",
	"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "resourceVersion": "7"},
	"spec": {"replicas": replicas},
}

scale_review(new, old) := {
	"uid": "req-3", "operation": "UPDATE",
	"kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
	"resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "subResource": "scale",
	"name": "web", "namespace": "team-a", "object": new, "oldObject": old,
}

synced_web := {"namespace": {"team-a": {"apps/v1": {"Deployment": {"web": json.patch(deployment(3), [{"op": "add", "path": "/metadata/resourceVersion", "value": "7"}])}}}}}

scale_params := object.union(params, {"scaleTargets": [{"apiGroup": "apps", "kind": "Deployment"}]})

# A scale is reviewed as the update of spec.replicas: the same amounts, at
# the generation the API server gives the workload (the synced one's plus one).
test_scale_is_reviewed_as_the_equivalent_replicas_update if {
	by_scale := {v.msg | some v in quotaallocation.violation} with input as {"review": scale_review(scale(20), scale(3)), "parameters": scale_params}
		with data.inventory as synced_web
		with quota.review as reported
	by_scale == {"UPDATE apps/Deployment uid-web gen 4: 1500 -> 10000"}
	by_update := {v.msg | some v in quotaallocation.violation} with input as {"review": review("UPDATE", deployment(20), deployment(3)), "parameters": scale_params}
		with quota.review as reported
	by_update == {"UPDATE apps/Deployment uid-web gen 20: 1500 -> 10000"}
}

test_scale_reserves_the_growth_under_the_next_generation if {
	# The synced web is at generation 3: the scale makes it 4.
	msgs := {v.msg | some v in quotaallocation.violation} with input as {"review": scale_review(scale(4), scale(3)), "parameters": scale_params}
		with data.inventory as synced_web
		with quota.review as reported
	msgs == {"UPDATE apps/Deployment uid-web gen 4: 1500 -> 2000"}
}

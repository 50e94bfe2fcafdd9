# Tests of lib.quota. Run with `quotactl opa test --quota
# rego/testdata/quota.yaml rego/`. What the library decides is quota.review's
# (Go; internal/builtins/review_test.go, and reviewfacts_test.go for what it
# reads of the review): these tests check what the library gathers for it
# (a Scale's workload, the namespace's labels from the inventory, the
# amounts), with quota.review replaced by reported
# (which answers the facts it was given as a violation), and the test_real_*
# tests run the real builtins against the --quota ledger.
package lib.quota_test

import data.lib.quota as quotalib

# ---------------------------------------------------------------------------
# Fixtures

pod(ns, name, uid) := {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {"name": name, "namespace": ns, "uid": uid},
}

admission(op, request_uid, o) := {
	"uid": request_uid,
	"operation": op,
	"kind": {"group": "", "version": "v1", "kind": o.kind},
	"name": o.metadata.name,
	"namespace": object.get(o.metadata, "namespace", ""),
	"object": o,
}

# What Gatekeeper's audit (and gator on a plain object) sends.
audit(o) := {
	"uid": "",
	"operation": "",
	"kind": {"group": "", "version": "v1", "kind": o.kind},
	"name": o.metadata.name,
	"namespace": object.get(o.metadata, "namespace", ""),
	"object": o,
}

inp(review, params) := {"review": review, "parameters": params}

pods := {"resourceType": "core/pods"}

by_org := {
	"resourceType": "core/pods",
	"consumers": [{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization"}],
}

inventory(ns, labels) := {"cluster": {"v1": {"Namespace": {ns: {
	"apiVersion": "v1",
	"kind": "Namespace",
	"metadata": {"name": ns, "labels": labels},
}}}}}

acme := inventory("team-a", {"resourcemanager.miloapis.com/organization": "acme"})

create := inp(admission("CREATE", "req-1", pod("team-a", "p1", "uid-1")), pods)

# quota.review replaced: the facts it was given, as one violation whose
# message says what would be reserved (operation, the kind and object
# counted, which are a Scale's workload's, its generation, the amounts).
reported(f, c) := [{
	"msg": sprintf("%s %s/%s %s uid %s gen %v: %v -> %v", [
		object.get(f.review, "operation", ""), k.apiGroup, k.kind, m.name, m.uid,
		object.get(m, "generation", 0), c.oldAmount, c.amount,
	]),
	"details": f,
}] if {
	k := reported_kind(f)
	m := object.get(reported_object(f), "metadata", {})
}

reported_kind(f) := f.scale.kind if {
	f.scale != null
} else := {"apiGroup": object.get(f.review.kind, "group", ""), "kind": f.review.kind.kind}

reported_object(f) := f.scale.object if {
	f.scale != null
} else := f.review.object

reported_msgs(vs) := {v.msg | some v in vs}

# ---------------------------------------------------------------------------
# Modes

test_mode_create_with_uid_reserves if {
	quotalib.mode == "reserve" with input as create
}

test_mode_update_with_uid_reserves if {
	quotalib.mode == "reserve" with input as inp(admission("UPDATE", "req-1", pod("team-a", "p1", "uid-1")), pods)
}

test_mode_dry_run_checks if {
	review := object.union(admission("CREATE", "req-1", pod("team-a", "p1", "uid-1")), {"dryRun": true})
	quotalib.mode == "check" with input as inp(review, pods)
}

test_mode_admission_without_uid_checks if {
	quotalib.mode == "check" with input as inp(admission("CREATE", "", pod("team-a", "p1", "uid-1")), pods)
}

test_mode_audit if {
	quotalib.mode == "audit" with input as inp(audit(pod("team-a", "p1", "uid-1")), pods)
}

test_mode_delete_does_nothing if {
	quotalib.mode == "none" with input as inp(admission("DELETE", "req-1", pod("team-a", "p1", "uid-1")), pods)
}

# ---------------------------------------------------------------------------
# The facts quota.review decides on

# quota.review reads the review itself (internal/builtins/reviewfacts_test.go):
# the library adds only what the inventory holds.
test_facts_of_a_create if {
	quotalib.review_facts == {
		"review": create.review,
		"parameters": pods,
		"scale": null,
		"inventoryNamespaceLabels": null,
	}
		with input as create
}

test_violations_ask_quota_review_with_the_amounts if {
	i := inp(admission("UPDATE", "req-7", json.patch(pod("team-a", "p1", "uid-1"), [{"op": "add", "path": "/metadata/generation", "value": 7}])), pods)
	reported_msgs(quotalib.violations(600, 100)) == {"UPDATE /Pod p1 uid uid-1 gen 7: 100 -> 600"} with input as i
		with quota.review as reported
}

# An answer that is a string (the External Data form of the builtins could
# not ask the provider) denies with it.
test_a_string_answer_denies_with_it if {
	quotalib.violations(1, 1) == {{"msg": "quota cannot decide: no answer", "details": {}}} with input as create
		with quota.review as "quota cannot decide: no answer"
}

labels_of(review) := l if {
	l := quotalib.review_facts.inventoryNamespaceLabels with input as inp(review, by_org)
}

test_namespace_labels_from_the_inventory if {
	labels_of(create.review) == {"resourcemanager.miloapis.com/organization": "acme"} with data.inventory as acme
}

# Gatekeeper attaches the namespace object to admission reviews: quota.review
# reads its labels, and the inventory is not looked up.
test_namespace_labels_not_looked_up_with_a_namespace_object if {
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"resourcemanager.miloapis.com/organization": "initech"}}}
	labels_of(object.union(create.review, {"namespaceObject": ns})) == null with data.inventory as acme
}

# The frameworks' client attaches an empty one when it has none.
test_namespace_labels_from_the_inventory_with_an_empty_namespace_object if {
	labels_of(object.union(create.review, {"namespaceObject": {}})) == {"resourcemanager.miloapis.com/organization": "acme"} with data.inventory as acme
}

test_namespace_labels_of_a_namespace_from_the_inventory_under_its_own_name if {
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "uid-ns"}}
	labels_of(admission("CREATE", "req-1", ns)) == {"resourcemanager.miloapis.com/organization": "acme"} with data.inventory as acme
}

test_namespace_labels_unknown_when_not_synced if {
	labels_of(create.review) == null with data.inventory as {}
}

# Audit asks quota.review only when some bucket of the constraint's resource
# types is over its limit, or an entry cannot be resolved (quota.review
# reports it): otherwise every object of an audit pass would be a call (an
# External Data request in the stock mode).
audit_review(params) := msgs if {
	msgs := reported_msgs(quotalib.violations(1, 1)) with input as inp(audit(pod("team-a", "p1", "uid-1")), params)
}

test_audit_asks_quota_review_only_when_a_bucket_is_over if {
	count(audit_review(pods)) == 0 with quota.over_limit as false with quota.review as reported
	audit_review(pods) == {" /Pod p1 uid uid-1 gen 0: 1 -> 1"} with quota.over_limit as true with quota.review as reported
	two := {"consumers": [{"kind": "Namespace", "resourceType": "core/pods"}, {"kind": "Namespace", "resourceType": "core/services"}]}
	count(audit_review(two)) == 1 with quota.over_limit as services_over with quota.review as reported
}

services_over(resource_type) if resource_type == "core/services"

test_audit_asks_quota_review_when_a_consumer_cannot_be_resolved if {
	every params in [
		{"resourceType": "core/pods", "consumers": []},
		{"consumers": [{"kind": "Namespace"}]},
		by_org,
	] {
		count(audit_review(params)) == 1 with quota.over_limit as false with quota.review as reported with data.inventory as inventory("team-a", {})
	}
	count(audit_review(by_org)) == 0 with quota.over_limit as false with quota.review as reported with data.inventory as acme
}

test_consumer_label_key_matches_go if {
	# api/v1alpha1.ConsumerLabelKey; TestConsumerLabelKeyMatchesGo runs the same cases through Go.
	quotalib.consumer_label_key("resourcemanager.miloapis.com", "Organization") == "resourcemanager.miloapis.com/organization"
	quotalib.consumer_label_key("", "Namespace") == "quota.miloapis.com/namespace"
}

# ---------------------------------------------------------------------------
# Amounts (real quota.quantity)

deployment(replicas, containers) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-d"},
	"spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}},
}

cpu(req) := {"name": "c", "resources": {"requests": {"cpu": req}, "limits": {"cpu": "4"}}}

amount_of(o, spec) := n if {
	n := quotalib.object_amount(o) with input as {"parameters": {"amount": spec}}
}

test_amount_replicas_times_container_requests if {
	spec := {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"}
	amount_of(deployment(3, [cpu("500m"), cpu("250m")]), spec) == 2250
}

test_amount_from_limits if {
	amount_of(deployment(2, [cpu("500m")]), {"resource": "cpu", "from": "limits", "unit": ""}) == 4
}

test_amount_absent_replicas_count_one_and_missing_requests_zero if {
	d := json.remove(deployment(3, [cpu("1"), {"name": "sidecar"}]), ["spec/replicas"])
	amount_of(d, {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"}) == 1000
}

test_amount_from_a_path_in_binary_units if {
	pvc := {"kind": "PersistentVolumeClaim", "spec": {"resources": {"requests": {"storage": "1536Mi"}}}}
	amount_of(pvc, {"path": ["spec", "resources", "requests", "storage"], "unit": "Gi"}) == 2
	amount_of(pvc, {"path": ["spec", "resources", "requests", "storage"], "unit": ""}) == 1610612736
	amount_of({"kind": "PersistentVolumeClaim"}, {"path": ["spec", "storage"], "unit": ""}) == 0
}

# A pod holds max(its containers and native sidecars, each regular init
# container with the sidecars started before it), as Kubernetes computes it
# (quota.pod_resources): here max(500m + 100m, 2 + 100m, 4 + 100m) = 4100m.
test_amount_counts_init_containers_and_sidecars_as_kubernetes_does if {
	d := json.patch(deployment(2, [cpu("500m")]), [{"op": "add", "path": "/spec/template/spec/initContainers", "value": [
		object.union(cpu("100m"), {"name": "proxy", "restartPolicy": "Always"}),
		object.union(cpu("2"), {"name": "migrate"}),
		object.union(cpu("4"), {"name": "once"}),
	]}])
	amount_of(d, {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"}) == 8200
	p := {"kind": "Pod", "spec": {"initContainers": [object.union(cpu("250m"), {"restartPolicy": "Always"})]}}
	amount_of(p, {"resource": "cpu", "unit": "m"}) == 250
}

# Issue 22, case 2: each of these counted 0 with a sum over containers.
test_amount_counts_pod_level_resources_and_limits_only_containers if {
	spec := {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"}
	pod_level := json.patch(deployment(4, [{"name": "app"}]), [{"op": "add", "path": "/spec/template/spec/resources", "value": {"requests": {"cpu": "1"}}}])
	amount_of(pod_level, spec) == 4000
	limits_only := deployment(4, [{"name": "app", "resources": {"limits": {"cpu": "1"}}}])
	amount_of(limits_only, spec) == 4000
}

test_amount_of_an_object_without_a_pod_spec_is_an_error if {
	amount_of({"kind": "ConfigMap"}, {"resource": "cpu", "unit": "m"}) == {"error": "no pod template: looked at spec.jobTemplate.spec.template.spec, spec.template.spec and template.spec (a Pod's own spec for kind Pod)"}
	amount_of(deployment(1, [cpu("1")]), {"resource": "cpu", "from": "limit"}) == {"error": "parameters.amount.from: must be \"requests\" or \"limits\", got limit"}
}

test_amount_of_a_pod_and_a_cronjob if {
	p := {"kind": "Pod", "spec": {"containers": [cpu("100m")]}}
	amount_of(p, {"resource": "cpu", "unit": "m"}) == 100
	cj := {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [cpu("2")]}}}}}}
	amount_of(cj, {"resource": "cpu", "unit": "m"}) == 2000
}

test_amount_bad_specifications_are_errors if {
	amount_of(deployment(3, []), {"unit": "m"}) == {"error": "parameters.amount: set path or resource"}
	amount_of(deployment("three", []), {"resource": "cpu", "replicasPath": ["spec", "replicas"]}) == {"error": `replicas at ["spec", "replicas"]: must be a whole number, got three`}
}

# ---------------------------------------------------------------------------
# The scale subresource: a Scale review is the update of the synced workload's
# replicas.

web_at(replicas, generation, rv) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "generation": generation, "resourceVersion": rv},
	"spec": {"replicas": replicas, "template": {"spec": {"containers": [cpu("500m")]}}},
}

# What the API server sends for deployments/scale: the workload's name,
# namespace, uid and resourceVersion, and the replicas; no generation.
scale_at(replicas, rv) := {
	"apiVersion": "autoscaling/v1",
	"kind": "Scale",
	"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "resourceVersion": rv, "creationTimestamp": "2026-11-22T10:00:00Z"},
	"spec": {"replicas": replicas},
	"status": {"replicas": 3, "selector": "app=web"},
}

scale_review(request_uid, resource, new, old) := {
	"uid": request_uid,
	"operation": "UPDATE",
	"kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
	"resource": resource,
	"subResource": "scale",
	"name": new.metadata.name,
	"namespace": new.metadata.namespace,
	"object": new,
	"oldObject": old,
}

deployments := {"group": "apps", "version": "v1", "resource": "deployments"}

scale_of_web(from, to) := scale_review("req-s", deployments, scale_at(to, "41"), scale_at(from, "41"))

cpu_with_scale := {
	"resourceType": "core/requests.cpu",
	"amount": {"resource": "cpu", "replicasPath": ["spec", "replicas"], "unit": "m"},
	"scaleTargets": [{"apiGroup": "apps", "kind": "Deployment"}],
}

synced(gv, kind, o) := {"namespace": {o.metadata.namespace: {gv: {kind: {o.metadata.name: o}}}}}

web_synced := synced("apps/v1", "Deployment", web_at(3, 4, "41"))

# What QuotaAllocation asks: the amounts of obj and old_obj.
scale_msgs := {v.msg | some v in vs} if {
	vs := quotalib.violations(quotalib.object_amount(quotalib.obj), quotalib.object_amount(quotalib.old_obj))
}

test_scale_is_reviewed_as_the_update_of_the_synced_workload if {
	i := inp(scale_of_web(3, 20), cpu_with_scale)
	quotalib.obj == web_at(20, 5, "41") with input as i with data.inventory as web_synced
	quotalib.old_obj == web_at(3, 4, "41") with input as i with data.inventory as web_synced
	f := quotalib.review_facts with input as i with data.inventory as web_synced
	f.scale == {
		"kind": {"apiGroup": "apps", "kind": "Deployment"},
		"object": {"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "generation": 5}},
		"oldObject": {"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "generation": 4}},
	}
}

test_scale_up_reserves_the_growth_under_the_workloads_next_generation if {
	msgs := scale_msgs with input as inp(scale_of_web(3, 4), cpu_with_scale)
		with data.inventory as web_synced
		with quota.review as reported
	msgs == {"UPDATE apps/Deployment web uid uid-web gen 5: 1500 -> 2000"}
}

test_scale_that_does_not_add_replicas_is_not_checked if {
	# No inventory: nothing needs the workload.
	every to in [3, 2, 0] {
		i := inp(scale_of_web(3, to), cpu_with_scale)
		count(scale_msgs) == 0 with input as i with data.inventory as {} with quota.review as reported
	}

	# spec.replicas 0 is omitted from a Scale.
	from_zero := scale_review("req-s", deployments, scale_at(2, "41"), json.remove(scale_at(0, "41"), ["spec/replicas"]))
	scale_msgs == {"UPDATE apps/Deployment web uid uid-web gen 5: 0 -> 1000"} with input as inp(from_zero, cpu_with_scale)
		with data.inventory as web_synced
		with quota.review as reported
}

test_scale_of_a_kind_the_constraint_does_not_list_is_not_checked if {
	statefulsets := {"group": "apps", "version": "v1", "resource": "statefulsets"}
	r := scale_review("req-s", statefulsets, scale_at(20, "41"), scale_at(3, "41"))
	count(scale_msgs) == 0 with input as inp(r, cpu_with_scale) with data.inventory as {} with quota.review as reported
	no_targets := json.remove(cpu_with_scale, ["scaleTargets"])
	count(scale_msgs) == 0 with input as inp(scale_of_web(3, 20), no_targets)
		with data.inventory as web_synced
		with quota.review as reported
}

test_scale_of_a_workload_missing_from_the_inventory_denies if {
	i := inp(scale_of_web(3, 4), cpu_with_scale)
	scale_msgs == {`quota: cannot check the scale of Deployment "web": it is not in Gatekeeper's synced inventory (sync apps/v1 Deployment)`} with input as i
		with data.inventory as acme
		with quota.review as reported
}

test_scale_against_a_stale_synced_copy_denies if {
	i := inp(scale_of_web(3, 4), cpu_with_scale)
	stale := synced("apps/v1", "Deployment", web_at(3, 3, "40"))
	scale_msgs == {`quota: cannot check the scale of Deployment "web": Gatekeeper's synced copy is at resourceVersion 40, the Deployment at 41; retry`} with input as i
		with data.inventory as stale
		with quota.review as reported
}

test_scale_dry_run_predicts_the_denial_without_reserving if {
	r := object.union(scale_of_web(3, 20), {"dryRun": true})
	vs := quotalib.violations(quotalib.object_amount(quotalib.obj), quotalib.object_amount(quotalib.old_obj)) with input as inp(r, cpu_with_scale)
		with data.inventory as web_synced
		with quota.review as reported
	[v.details.review.dryRun | some v in vs] == [true]
	reported_msgs(vs) == {"UPDATE apps/Deployment web uid uid-web gen 5: 1500 -> 10000"}
}

test_scale_of_a_core_kind_and_a_custom_resource if {
	rcs := {"group": "", "version": "v1", "resource": "replicationcontrollers"}
	rc := json.patch(web_at(3, 4, "41"), [{"op": "replace", "path": "/apiVersion", "value": "v1"}, {"op": "replace", "path": "/kind", "value": "ReplicationController"}])
	p := object.union(cpu_with_scale, {"scaleTargets": [{"kind": "ReplicationController"}]})
	r := scale_review("req-s", rcs, scale_at(4, "41"), scale_at(3, "41"))
	scale_msgs == {"UPDATE /ReplicationController web uid uid-web gen 5: 1500 -> 2000"} with input as inp(r, p)
		with data.inventory as synced("v1", "ReplicationController", rc)
		with quota.review as reported
	scale_msgs == {`quota: cannot check the scale of ReplicationController "web": it is not in Gatekeeper's synced inventory (sync v1 ReplicationController)`} with input as inp(r, p)
		with data.inventory as {}

	# A custom resource whose plural is not the kind plus "s", its replicas elsewhere.
	proxies := {"group": "example.com", "version": "v2", "resource": "proxies"}
	proxy := {
		"apiVersion": "example.com/v2", "kind": "Proxy",
		"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web", "generation": 1, "resourceVersion": "41"},
		"spec": {"workers": 3, "template": {"spec": {"containers": [cpu("250m")]}}},
	}
	pp := {
		"resourceType": "core/requests.cpu",
		"amount": {"resource": "cpu", "replicasPath": ["spec", "workers"], "unit": "m"},
		"scaleTargets": [{"apiGroup": "example.com", "kind": "Proxy", "resource": "proxies"}],
	}
	rp := scale_review("req-s", proxies, scale_at(5, "41"), scale_at(3, "41"))
	scale_msgs == {"UPDATE example.com/Proxy web uid uid-web gen 2: 750 -> 1250"} with input as inp(rp, pp)
		with data.inventory as synced("example.com/v2", "Proxy", proxy)
		with quota.review as reported
}

test_scale_never_changes_an_object_count if {
	# QuotaEntity asks violations(1, 1): a checked Scale grows nothing (the
	# real quota.review, which would deny with the ledger's numbers).
	i := inp(scale_of_web(3, 20), object.union(pods, {"scaleTargets": [{"apiGroup": "apps", "kind": "Deployment"}]}))
	count(quotalib.violations(1, 1)) == 0 with input as i with data.inventory as web_synced
}

# ---------------------------------------------------------------------------
# Real builtins against the --quota ledger: Namespace real-limit may hold 2
# pods, Namespace real-modes 1. Each test owns its namespace.

real(op, request_uid, ns, uid) := msgs if {
	vs := quotalib.violations(1, 1) with input as inp(admission(op, request_uid, pod(ns, uid, uid)), pods)
	msgs := {v.msg | some v in vs}
}

test_real_two_allowed_then_denied_with_the_numbers if {
	real("CREATE", "r1", "real-limit", "a") == set()
	real("CREATE", "r2", "real-limit", "b") == set()
	real("CREATE", "r3", "real-limit", "c") == {"quota exceeded for Namespace real-limit: requested 1 of core/pods, available 0 of 2 (allocated 0, reserved 2); see EffectiveResourceGrant real-limit/core-pods-c623196fca2219d9 (kubectl quota usage -n real-limit)"}
}

test_real_dry_run_audit_and_repeats_never_reserve if {
	dry := object.union(admission("CREATE", "r1", pod("real-modes", "x", "x")), {"dryRun": true})
	{v.msg | some v in quotalib.violations(1, 1)} == set() with input as inp(dry, pods)
	{v.msg | some v in quotalib.violations(1, 1)} == set() with input as inp(audit(pod("real-modes", "y", "y")), pods)
	real("CREATE", "r2", "real-modes", "z") == set()
	real("CREATE", "r2", "real-modes", "z") == set()
	real("CREATE", "r3", "real-modes", "w") == {"quota exceeded for Namespace real-modes: requested 1 of core/pods, available 0 of 1 (allocated 0, reserved 1); see EffectiveResourceGrant real-modes/core-pods-d625d4170300d8b6 (kubectl quota usage -n real-modes)"}
	{v.msg | some v in quotalib.violations(1, 1)} == {"quota exceeded for Namespace real-modes: requested 1 of core/pods, available 0 of 1 (allocated 0, reserved 1); see EffectiveResourceGrant real-modes/core-pods-d625d4170300d8b6 (kubectl quota usage -n real-modes)"} with input as inp(object.union(admission("CREATE", "r4", pod("real-modes", "v", "v")), {"dryRun": true}), pods)
}

# Namespace real-scale may hold 2000 millicores: a scale of web (3 x 500m,
# not counted here: the ledger starts empty) to 20 is denied with the same
# numbers as the update of spec.replicas to 20; to 4 it reserves 500 once.
in_real_scale(o) := json.patch(o, [{"op": "replace", "path": "/metadata/namespace", "value": "real-scale"}])

real_scale(from, to, request_uid) := msgs if {
	r := scale_review(request_uid, deployments, in_real_scale(scale_at(to, "41")), in_real_scale(scale_at(from, "41")))
	msgs := scale_msgs with input as inp(r, cpu_with_scale)
		with data.inventory as synced("apps/v1", "Deployment", in_real_scale(web_at(3, 4, "41")))
}

test_real_scale_is_denied_like_the_update_of_replicas if {
	want := {"quota exceeded for Namespace real-scale: requested 8500 of core/requests.cpu, available 2000 of 2000 (allocated 0, reserved 0); in cores (1000 millicores each): requested 8.5, available 2 of 2 (allocated 0, reserved 0); see EffectiveResourceGrant real-scale/core-requests-cpu-8246841d271a8f0c (kubectl quota usage -n real-scale)"}
	real_scale(3, 20, "req-1") == want
	update := {
		"uid": "req-2",
		"operation": "UPDATE",
		"kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
		"object": in_real_scale(web_at(20, 5, "")),
		"oldObject": in_real_scale(web_at(3, 4, "41")),
	}
	scale_msgs == want with input as inp(update, cpu_with_scale)
	real_scale(3, 4, "req-3") == set()
	real_scale(3, 4, "req-4") == set()
	real_scale(3, 8, "req-5") == {"quota exceeded for Namespace real-scale: requested 2500 of core/requests.cpu, available 1500 of 2000 (allocated 0, reserved 500); in cores (1000 millicores each): requested 2.5, available 1.5 of 2 (allocated 0, reserved 0.5); see EffectiveResourceGrant real-scale/core-requests-cpu-8246841d271a8f0c (kubectl quota usage -n real-scale)"}
}

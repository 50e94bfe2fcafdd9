# Tests of lib.quota. Run with `quotactl opa test --quota
# rego/testdata/quota.yaml rego/`: quota.quantity and the test_real_* tests
# use the real builtins; every other test replaces quota.reserve and
# quota.usage (and quota.over_limit, where audit depends on it) with mocks,
# so each asserts exactly what the library asked.
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

# A decision as quota.reserve returns it, refused for one request.
refused(claim) := {
	"id": claim.id,
	"granted": false,
	"message": "requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1)",
	"requests": [{
		"consumer": claim.requests[0].consumer,
		"resourceType": claim.requests[0].resourceType,
		"dimensions": claim.requests[0].dimensions,
		"amount": claim.requests[0].amount,
		"bucket": "core-pods-0123",
		"granted": false,
		"reason": "QuotaExceeded",
		"limit": 3,
		"allocated": 2,
		"reserved": 1,
		"available": 0,
		"message": sprintf("requested %d of core/pods, available 0 of 3 (allocated 2, reserved 1)", [claim.requests[0].amount]),
		"units": {"baseUnit": "pods", "unitConversionFactor": 1},
		"effectiveResourceGrant": "core-pods-0123",
	}],
}

granted(claim) := {"id": claim.id, "granted": true, "message": "granted", "requests": []}

# Reports the claim it was given as a refusal, so a test can see what was reserved.
echo(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [{
	"consumer": claim.requests[0].consumer,
	"resourceType": claim.requests[0].resourceType,
	"dimensions": claim.requests[0].dimensions,
	"amount": claim.requests[0].amount,
	"bucket": "b",
	"reason": "QuotaExceeded",
	"limit": 0,
	"allocated": 0,
	"reserved": 0,
	"available": 0,
	"message": sprintf("reserved %s %d", [claim.id, claim.requests[0].amount]),
}]}

full(_) := {"bucket": "core-pods-0123", "limit": 3, "allocated": 3, "reserved": 0, "available": 0, "effectiveResourceGrant": "core-pods-0123"}

roomy(_) := {"bucket": "core-pods-0123", "limit": 3, "allocated": 1, "reserved": 0, "available": 2, "effectiveResourceGrant": "core-pods-0123"}

over(_) := {"bucket": "core-pods-0123", "limit": 3, "allocated": 4, "reserved": 1, "available": 0, "effectiveResourceGrant": "core-pods-0123"}

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
# The claim

test_claim_for_create if {
	quotalib.claim(1, 0) == {
		"id": "uid-1",
		"object": {"apiGroup": "", "kind": "Pod", "namespace": "team-a", "name": "p1", "uid": "uid-1"},
		"requests": [{
			"consumer": {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""},
			"resourceType": "core/pods",
			"amount": 1,
			"total": 0,
			"dimensions": {},
		}],
		"policyVersion": "",
	}
		with input as create
}

# The constraint's policy version travels with every claim: quota.reserve
# denies while the observer has not counted under it.
test_claim_carries_the_policy_version if {
	quotalib.claim(1, 0).policyVersion == "QuotaEntity/pods/0123456789abcdef"
		with input as json.patch(create, [{"op": "add", "path": "/parameters/policyVersion", "value": "QuotaEntity/pods/0123456789abcdef"}])
}

at_generation(o, g) := json.patch(o, [{"op": "add", "path": "/metadata/generation", "value": g}])

test_claim_id_for_update_is_object_uid_new_generation_and_growth if {
	p := at_generation(pod("team-a", "p1", "uid-1"), 7)
	quotalib.claim_id(500) == "uid-1/7/500" with input as inp(admission("UPDATE", "req-7", p), pods)
}

test_claim_id_for_update_is_the_same_for_a_retried_request if {
	p := at_generation(pod("team-a", "p1", "uid-1"), 7)
	first := quotalib.claim_id(500) with input as inp(admission("UPDATE", "req-7", p), pods)
	retry := quotalib.claim_id(500) with input as inp(admission("UPDATE", "req-8", p), pods)
	first == retry
}

# A rejected update never persists its generation, so the next update gets the
# same one; with another growth it must not find the rejected one's reservation.
test_claim_id_for_update_differs_by_growth if {
	p := at_generation(pod("team-a", "p1", "uid-1"), 7)
	small := quotalib.claim_id(500) with input as inp(admission("UPDATE", "req-7", p), pods)
	large := quotalib.claim_id(1500) with input as inp(admission("UPDATE", "req-8", p), pods)
	small != large
}

test_claim_id_for_update_of_a_kind_without_generation_uses_0 if {
	quotalib.claim_id(1) == "uid-1/0/1" with input as inp(admission("UPDATE", "req-7", pod("team-a", "p1", "uid-1")), pods)
}

test_claim_one_request_per_consumer_in_order if {
	params := {
		"resourceType": "core/pods",
		"dimensions": {"tier": "gold"},
		"consumers": [
			{"apiGroup": "resourcemanager.miloapis.com", "kind": "Project", "resourceType": "core/pods-per-project"},
			{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "dimensions": {"region": "eu"}},
		],
	}
	labels := {"resourcemanager.miloapis.com/project": "web", "resourcemanager.miloapis.com/organization": "acme"}
	c := quotalib.claim(1, 0) with input as inp(admission("CREATE", "req-1", pod("team-a", "p1", "uid-1")), params)
		with data.inventory as inventory("team-a", labels)
	c.requests == [
		{
			"consumer": {"apiGroup": "resourcemanager.miloapis.com", "kind": "Project", "name": "web", "namespace": ""},
			"resourceType": "core/pods-per-project",
			"amount": 1,
			"total": 0,
			"dimensions": {"tier": "gold"},
		},
		{
			"consumer": {"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "acme", "namespace": ""},
			"resourceType": "core/pods",
			"amount": 1,
			"total": 0,
			"dimensions": {"tier": "gold", "region": "eu"},
		},
	]
}

# ---------------------------------------------------------------------------
# Consumers

consumer_of(review, params) := c if {
	c := quotalib.scopes[0].consumer with input as inp(review, params)
}

test_consumer_fixed_name if {
	params := {"resourceType": "core/pods", "consumers": [{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "globex"}]}
	consumer_of(create.review, params) == {"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "globex", "namespace": ""}
}

test_consumer_defaults_to_the_namespace if {
	consumer_of(create.review, pods) == {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""}
}

test_consumer_from_inventory_label if {
	c := consumer_of(create.review, by_org) with data.inventory as acme
	c == {"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "acme", "namespace": ""}
}

test_consumer_namespace_object_wins_over_inventory if {
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"resourcemanager.miloapis.com/organization": "initech"}}}
	review := object.union(create.review, {"namespaceObject": ns})
	c := consumer_of(review, by_org) with data.inventory as acme
	c.name == "initech"
}

test_consumer_of_a_namespace_is_read_from_its_own_labels if {
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-z", "uid": "uid-ns", "labels": {"resourcemanager.miloapis.com/organization": "acme"}}}
	c := consumer_of(admission("CREATE", "req-1", ns), by_org)
	c.name == "acme"
	consumer_of(admission("CREATE", "req-1", ns), pods).name == "team-z"
}

test_consumer_label_key_override if {
	params := {"resourceType": "core/pods", "consumers": [{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "labelKey": "example.com/org"}]}
	c := consumer_of(create.review, params) with data.inventory as inventory("team-a", {"example.com/org": "acme"})
	c.name == "acme"
}

test_consumer_label_key_matches_go if {
	# api/v1alpha1.ConsumerLabelKey; TestConsumerLabelKeyMatchesGo runs the same cases through Go.
	quotalib.consumer_label_key("resourcemanager.miloapis.com", "Organization") == "resourcemanager.miloapis.com/organization"
	quotalib.consumer_label_key("", "Namespace") == "quota.miloapis.com/namespace"
}

errors_for(review, params) := errs if {
	vs := quotalib.violations(1, 1) with input as inp(review, params)
		with quota.reserve as granted
		with quota.usage as roomy
	errs := {v.msg | some v in vs}
}

test_missing_label_denies_and_names_it if {
	errs := errors_for(create.review, by_org) with data.inventory as inventory("team-a", {})
	errs == {`quota: cannot find the Organization of namespace "team-a": it has no label "resourcemanager.miloapis.com/organization"`}
}

test_unsynced_namespace_denies if {
	errs := errors_for(create.review, by_org) with data.inventory as {}
	errs == {`quota: cannot find the Organization of namespace "team-a": the namespace is not in Gatekeeper's synced inventory (sync v1 Namespace)`}
}

test_cluster_scoped_object_cannot_use_namespace_consumer if {
	crb := {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "admin2", "uid": "uid-cr"}}
	review := object.union(admission("CREATE", "req-1", crb), {"kind": {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"}})
	errors_for(review, pods) == {`quota: cannot count ClusterRole "admin2" against a namespace: it is cluster-scoped`}
	errors_for(review, by_org) == {`quota: cannot find the Organization of ClusterRole "admin2": it is cluster-scoped, so no namespace label "resourcemanager.miloapis.com/organization" names one`}
}

test_empty_consumers_denies if {
	errors_for(create.review, {"resourceType": "core/pods", "consumers": []}) == {"quota: parameters.consumers: must not be empty"}
}

test_missing_resource_type_denies if {
	errors_for(create.review, {}) == {"quota: parameters.resourceType: required (or parameters.consumers[0].resourceType)"}
}

# ---------------------------------------------------------------------------
# Violations

v_refused_roomy(i) := vs if {
	vs := quotalib.violations(1, 1) with input as i
		with quota.reserve as refused
		with quota.usage as roomy
}

v_refused_over(i) := vs if {
	vs := quotalib.violations(1, 1) with input as i
		with quota.reserve as refused
		with quota.usage as over
		with quota.over_limit as true
}

v_granted_roomy(i) := vs if {
	vs := quotalib.violations(1, 1) with input as i
		with quota.reserve as granted
		with quota.usage as roomy
}

v_granted_full(i) := vs if {
	vs := quotalib.violations(1, 1) with input as i
		with quota.reserve as granted
		with quota.usage as full
}

test_refused_reservation_is_one_violation_with_the_numbers if {
	v_refused_roomy(create) == {{
		"msg": "quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)",
		"details": {
			"consumer": {"apiGroup": "", "kind": "Namespace", "name": "team-a", "namespace": ""},
			"resourceType": "core/pods",
			"dimensions": {},
			"requested": 1,
			"limit": 3,
			"allocated": 2,
			"reserved": 1,
			"available": 0,
			"bucket": "core-pods-0123",
		},
	}}
}

test_granted_reservation_is_no_violation if {
	count(v_granted_full(create)) == 0
}

test_dimensions_are_named_in_the_message if {
	i := inp(create.review, {"resourceType": "core/pods", "dimensions": {"zone": "b", "tier": "gold"}})
	{v.msg | some v in v_refused_roomy(i)} == {"quota exceeded for Namespace team-a {tier=gold,zone=b}: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)"}
}

test_audit_never_reserves if {
	# refused would turn a reservation into a violation.
	count(v_refused_roomy(inp(audit(pod("team-a", "p1", "uid-1")), pods))) == 0
}

test_audit_reports_consumers_over_their_limit if {
	{v.msg | some v in v_refused_over(inp(audit(pod("team-a", "p1", "uid-1")), pods))} == {"Namespace team-a is over its quota of core/pods: allocated 4, reserved 1, limit 3"}
}

# quota.over_limit false (no bucket of the resource type over its limit, from
# the index) ends audit before any bucket is read: quota.usage, which would
# say over, is never asked.
test_audit_asks_usage_only_when_some_bucket_is_over if {
	vs := quotalib.violations(1, 1) with input as inp(audit(pod("team-a", "p1", "uid-1")), pods)
		with quota.usage as over
		with quota.over_limit as false
	count(vs) == 0
}

# It is asked of each consumer's resource type; one over is enough for the
# object's buckets to be read.
test_audit_asks_over_limit_of_each_resource_type if {
	params := {"consumers": [{"kind": "Namespace", "resourceType": "core/pods"}, {"kind": "Namespace", "resourceType": "core/services"}]}
	{v.msg | some v in quotalib.violations(1, 1)} == {
		"Namespace team-a is over its quota of core/pods: allocated 4, reserved 1, limit 3",
		"Namespace team-a is over its quota of core/services: allocated 4, reserved 1, limit 3",
	}
		with input as inp(audit(pod("team-a", "p1", "uid-1")), params)
		with quota.usage as over
		with quota.over_limit as services_over
}

services_over(resource_type) if resource_type == "core/services"

# Configuration errors are reported whatever the buckets say.
test_audit_reports_configuration_errors_with_no_bucket_over if {
	vs := quotalib.violations(1, 1) with input as inp(audit(pod("team-a", "p1", "uid-1")), {"consumers": []})
		with quota.over_limit as false
	{v.msg | some v in vs} == {"quota: parameters.consumers: must not be empty"}
}

# ---------------------------------------------------------------------------
# What a denial shows: the display unit beside the base units, and where to
# read the numbers.

cores := {"baseUnit": "millicores", "displayUnit": "cores", "unitConversionFactor": 1000}

refused_in_cores(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 8000, "allocated": 7500, "reserved": 500, "available": 0,
	"message": sprintf("requested %d of core/pods, available 0 of 8000 (allocated 7500, reserved 500)", [claim.requests[0].amount]),
	"units": cores, "effectiveResourceGrant": "e",
})]}

refused_in_dozens(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 40, "allocated": 30, "reserved": 4, "available": 6,
	"message": sprintf("requested %d of core/pods, available 6 of 40 (allocated 30, reserved 4)", [claim.requests[0].amount]),
	"units": {"baseUnit": "eggs", "displayUnit": "dozens", "unitConversionFactor": 12}, "effectiveResourceGrant": "e",
})]}

refused_in_base_units(claim) := {"id": claim.id, "granted": false, "message": "", "requests": [object.union(claim.requests[0], {
	"bucket": "b", "reason": "QuotaExceeded", "limit": 3, "allocated": 3, "reserved": 0, "available": 0,
	"message": sprintf("requested %d of core/pods, available 0 of 3 (allocated 3, reserved 0)", [claim.requests[0].amount]),
	"units": {"baseUnit": "pods", "displayUnit": "pods", "unitConversionFactor": 1}, "effectiveResourceGrant": "e",
})]}

test_denial_shows_the_display_unit_exactly if {
	{v.msg | some v in quotalib.violations(500, 0)} == {"quota exceeded for Namespace team-a: requested 500 of core/pods, available 0 of 8000 (allocated 7500, reserved 500); in cores (1000 millicores each): requested 0.5, available 0 of 8 (allocated 7.5, reserved 0.5); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)"} with input as create
		with quota.reserve as refused_in_cores

	# 7 eggs is 7/12 of a dozen: no finite decimal, so the exact fraction;
	# 6 eggs is 0.5.
	{v.msg | some v in quotalib.violations(7, 0)} == {"quota exceeded for Namespace team-a: requested 7 of core/pods, available 6 of 40 (allocated 30, reserved 4); in dozens (12 eggs each): requested 7/12, available 0.5 of 10/3 (allocated 2.5, reserved 1/3); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)"} with input as create
		with quota.reserve as refused_in_dozens

	# A display unit that is the base unit adds nothing.
	{v.msg | some v in quotalib.violations(1, 0)} == {"quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 3, reserved 0); see EffectiveResourceGrant team-a/e (kubectl quota usage -n team-a)"} with input as create
		with quota.reserve as refused_in_base_units
}

test_denial_of_a_namespace_points_to_the_whole_cluster if {
	# A Namespace being created has no EffectiveResourceGrants yet.
	ns := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-z", "uid": "uid-ns", "labels": {"resourcemanager.miloapis.com/organization": "acme"}}}
	{v.msg | some v in quotalib.violations(1, 0)} == {"quota exceeded for Organization acme: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see kubectl quota usage -A"} with input as inp(admission("CREATE", "req-1", ns), by_org)
		with quota.reserve as refused
}

test_denial_for_a_consumer_the_namespace_does_not_belong_to_points_to_the_whole_cluster if {
	# A consumer named in the parameters: team-a is not one of globex's
	# namespaces, so globex's EffectiveResourceGrants are elsewhere.
	params := {"resourceType": "core/pods", "consumers": [{"apiGroup": "resourcemanager.miloapis.com", "kind": "Organization", "name": "globex"}]}
	{v.msg | some v in quotalib.violations(1, 0)} == {"quota exceeded for Organization globex: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see kubectl quota usage -A"} with input as inp(create.review, params)
		with data.inventory as acme
		with quota.reserve as refused

	# The same consumer found through the namespace's label is there.
	{v.msg | some v in quotalib.violations(1, 0)} == {"quota exceeded for Organization acme: requested 1 of core/pods, available 0 of 3 (allocated 2, reserved 1); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)"} with input as inp(create.review, by_org)
		with data.inventory as acme
		with quota.reserve as refused
}

test_display_builtin_is_exact if {
	quota.display(500, cores) == "0.5"
	quota.display(8000, cores) == "8"
	quota.display(1, cores) == "0.001"
	quota.display(1, {"baseUnit": "x", "displayUnit": "thirds", "unitConversionFactor": 3}) == "1/3"
	quota.display(1536, {"baseUnit": "B", "displayUnit": "KiB", "unitConversionFactor": 1024}) == "1.5"
	quota.display(7, {"baseUnit": "pods"}) == "7"
	quota.display(7, {}) == "7"
}

test_audit_over_limit_report_can_be_disabled if {
	params := object.union(pods, {"reportOverLimit": false})
	count(v_refused_over(inp(audit(pod("team-a", "p1", "uid-1")), params))) == 0
}

test_dry_run_never_reserves_but_predicts_the_denial if {
	review := object.union(create.review, {"dryRun": true})
	count(v_refused_roomy(inp(review, pods))) == 0
	{v.msg | some v in v_granted_full(inp(review, pods))} == {"quota exceeded for Namespace team-a: requested 1 of core/pods, available 0 of 3 (allocated 3, reserved 0); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)"}
}

test_admission_without_request_uid_never_reserves if {
	i := inp(admission("CREATE", "", pod("team-a", "p1", "uid-1")), pods)
	count(v_refused_roomy(i)) == 0
}

test_update_reserves_only_the_growth_under_its_own_id if {
	i := inp(admission("UPDATE", "req-2", at_generation(pod("team-a", "p1", "uid-1"), 2)), pods)
	vs := quotalib.violations(5, 3) with input as i with quota.reserve as echo with quota.usage as roomy
	{v.msg | some v in vs} == {"quota exceeded for Namespace team-a: reserved uid-1/2/2 2; see kubectl quota usage -n team-a"}
}

test_update_that_does_not_grow_reserves_nothing if {
	i := inp(admission("UPDATE", "req-2", pod("team-a", "p1", "uid-1")), pods)
	same := quotalib.violations(3, 3) with input as i with quota.reserve as echo with quota.usage as full
	count(same) == 0
	shrunk := quotalib.violations(2, 3) with input as i with quota.reserve as echo with quota.usage as full
	count(shrunk) == 0
}

test_create_of_nothing_reserves_nothing if {
	vs := quotalib.violations(0, 0) with input as create with quota.reserve as echo
	count(vs) == 0
}

test_delete_reserves_nothing if {
	i := inp(admission("DELETE", "req-1", pod("team-a", "p1", "uid-1")), pods)
	count(v_refused_over(i)) == 0
}

test_missing_object_uid_denies if {
	i := inp(admission("CREATE", "req-1", pod("team-a", "p1", "")), pods)
	{v.msg | some v in v_granted_roomy(i)} == {`quota: cannot reserve for Pod "p1": metadata.uid is empty (the API server sets it before validating admission)`}
}

test_configuration_error_denies_without_reserving if {
	# echo would report a reservation; only the configuration error may appear.
	{v.msg | some v in quotalib.violations(1, 1)} == {`quota: cannot find the Organization of namespace "team-a": it has no label "resourcemanager.miloapis.com/organization"`} with input as inp(create.review, by_org)
		with data.inventory as inventory("team-a", {})
		with quota.reserve as echo
}

test_bad_amounts_deny if {
	{v.msg | some v in quotalib.violations(1.5, 0)} == {`quota: cannot count Pod "p1": the amount must be a whole number, got 1.5`} with input as create
	{v.msg | some v in quotalib.violations({"error": "parameters.amount: set path or resource"}, 0)} == {`quota: cannot count Pod "p1": parameters.amount: set path or resource`} with input as create
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
	quotalib.object_ref == {"apiGroup": "apps", "kind": "Deployment", "namespace": "team-a", "name": "web", "uid": "uid-web"} with input as i
		with data.inventory as web_synced
	quotalib.claim_id(8500) == "uid-web/5/8500" with input as i with data.inventory as web_synced
}

test_scale_up_reserves_the_growth_under_the_workloads_next_generation if {
	msgs := scale_msgs with input as inp(scale_of_web(3, 4), cpu_with_scale)
		with data.inventory as web_synced
		with quota.reserve as echo
	msgs == {"quota exceeded for Namespace team-a: reserved uid-web/5/500 500; see kubectl quota usage -n team-a"}
}

test_scale_that_does_not_add_replicas_is_not_checked if {
	# No inventory: nothing needs the workload.
	every to in [3, 2, 0] {
		i := inp(scale_of_web(3, to), cpu_with_scale)
		count(scale_msgs) == 0 with input as i with data.inventory as {} with quota.reserve as echo
	}

	# spec.replicas 0 is omitted from a Scale.
	from_zero := scale_review("req-s", deployments, scale_at(2, "41"), json.remove(scale_at(0, "41"), ["spec/replicas"]))
	scale_msgs == {"quota exceeded for Namespace team-a: reserved uid-web/5/1000 1000; see kubectl quota usage -n team-a"} with input as inp(from_zero, cpu_with_scale)
		with data.inventory as web_synced
		with quota.reserve as echo
}

test_scale_of_a_kind_the_constraint_does_not_list_is_not_checked if {
	statefulsets := {"group": "apps", "version": "v1", "resource": "statefulsets"}
	r := scale_review("req-s", statefulsets, scale_at(20, "41"), scale_at(3, "41"))
	count(scale_msgs) == 0 with input as inp(r, cpu_with_scale) with data.inventory as {} with quota.reserve as echo
	no_targets := json.remove(cpu_with_scale, ["scaleTargets"])
	count(scale_msgs) == 0 with input as inp(scale_of_web(3, 20), no_targets)
		with data.inventory as web_synced
		with quota.reserve as echo
}

test_scale_of_a_workload_missing_from_the_inventory_denies if {
	i := inp(scale_of_web(3, 4), cpu_with_scale)
	scale_msgs == {`quota: cannot check the scale of Deployment "web": it is not in Gatekeeper's synced inventory (sync apps/v1 Deployment)`} with input as i
		with data.inventory as acme
		with quota.reserve as echo
}

test_scale_against_a_stale_synced_copy_denies if {
	i := inp(scale_of_web(3, 4), cpu_with_scale)
	stale := synced("apps/v1", "Deployment", web_at(3, 3, "40"))
	scale_msgs == {`quota: cannot check the scale of Deployment "web": Gatekeeper's synced copy is at resourceVersion 40, the Deployment at 41; retry`} with input as i
		with data.inventory as stale
		with quota.reserve as echo
}

test_scale_dry_run_predicts_the_denial_without_reserving if {
	r := object.union(scale_of_web(3, 20), {"dryRun": true})
	scale_msgs == {"quota exceeded for Namespace team-a: requested 8500 of core/requests.cpu, available 0 of 3 (allocated 3, reserved 0); see EffectiveResourceGrant team-a/core-pods-0123 (kubectl quota usage -n team-a)"} with input as inp(r, cpu_with_scale)
		with data.inventory as web_synced
		with quota.reserve as echo
		with quota.usage as full
}

test_scale_of_a_core_kind_and_a_custom_resource if {
	rcs := {"group": "", "version": "v1", "resource": "replicationcontrollers"}
	rc := json.patch(web_at(3, 4, "41"), [{"op": "replace", "path": "/apiVersion", "value": "v1"}, {"op": "replace", "path": "/kind", "value": "ReplicationController"}])
	p := object.union(cpu_with_scale, {"scaleTargets": [{"kind": "ReplicationController"}]})
	r := scale_review("req-s", rcs, scale_at(4, "41"), scale_at(3, "41"))
	scale_msgs == {"quota exceeded for Namespace team-a: reserved uid-web/5/500 500; see kubectl quota usage -n team-a"} with input as inp(r, p)
		with data.inventory as synced("v1", "ReplicationController", rc)
		with quota.reserve as echo
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
	scale_msgs == {"quota exceeded for Namespace team-a: reserved uid-web/2/500 500; see kubectl quota usage -n team-a"} with input as inp(rp, pp)
		with data.inventory as synced("example.com/v2", "Proxy", proxy)
		with quota.reserve as echo
}

test_scale_never_changes_an_object_count if {
	# QuotaEntity asks violations(1, 1): a checked Scale grows nothing.
	i := inp(scale_of_web(3, 20), object.union(pods, {"scaleTargets": [{"apiGroup": "apps", "kind": "Deployment"}]}))
	count(quotalib.violations(1, 1)) == 0 with input as i with data.inventory as web_synced with quota.reserve as echo
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

# parameters.claimViews asks for a ResourceClaim view of what the object
# counts: the claim carries a metadata field, empty.
test_claim_asks_for_a_view_only_with_claim_views if {
	not quotalib.claim(1, 0).metadata with input as create
	quotalib.claim(1, 0).metadata == {} with input as json.patch(create, [{"op": "add", "path": "/parameters/claimViews", "value": true}])
}

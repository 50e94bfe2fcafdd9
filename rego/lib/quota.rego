# Package lib.quota is quotakeeper's Rego library for quota ConstraintTemplates.
# Templates embed it through their `libs` and call these functions:
#
#   violations(amount, old_amount)  the set of {msg, details} for input.review
#   object_amount(obj)              the amount an object asks for, per
#                                   input.parameters.amount (QuotaAllocation)
#   claim_violations(requests, metadata)
#                                   the same for a claim the template states
#                                   itself (QuotaClaimPolicy: what a
#                                   ClaimCreationPolicy renders)
#
# It builds a claim from input.review and input.parameters, and reserves it
# with quota.reserve only for a real admission: operation CREATE (or UPDATE
# where the amount grows: the growth is reserved), a non-empty request uid
# (audit sends none) and not a dry run. Dry runs are checked read-only with
# quota.usage and get the message the real request would get; audit never
# reserves and reports consumers over their limit. An update of a scale
# subresource (kubectl scale, an HPA) is reviewed as the update of the
# workload's replicas, for the kinds parameters.scaleTargets lists (see "The
# scale subresource"). A reservation only covers
# the in-flight window: quotakeeper's observer evaluates the same template on
# every live object (quota.reserve then records instead of reserving) and
# counts what it finds. Parameters and result shapes:
# docs/policy-authoring.md.
#
# Import it under another name than `quota` (`import data.lib.quota as
# quotalib`): an import named `quota` would shadow the quota.* builtins.
package lib.quota

# ---------------------------------------------------------------------------
# The review

review := input.review

params := object.get(input, "parameters", {})

operation := object.get(review, "operation", "")

request_uid := object.get(review, "uid", "")

dry_run if review.dryRun == true

# For DELETE Gatekeeper puts the old object here too.
review_object := o if {
	o := review.object
	is_object(o)
} else := {}

review_old_object := o if {
	o := review.oldObject
	is_object(o)
} else := {}

# The object the review counts, and the one before an UPDATE: the reviewed
# objects, or for a scale subresource review the workload itself at the
# Scale's replicas (see "The scale subresource").
obj := o if {
	is_scale
	o := scaled_parent(review_object, object.get(scale_parent, ["metadata", "generation"], 0) + 1)
} else := review_object

old_obj := o if {
	is_scale
	o := scaled_parent(review_old_object, object.get(scale_parent, ["metadata", "generation"], 0))
} else := review_old_object

object_uid := object.get(obj, ["metadata", "uid"], "")

# mode is what this review does with quota:
#   reserve  a real admission: quota.reserve, keyed by the object's uid
#   check    a dry run, or an admission review without a request uid:
#            quota.usage only, same verdict and message as a real request
#   audit    no operation (Gatekeeper audit, gator on a plain object):
#            read-only, reports consumers above their limit
#   none     DELETE and CONNECT: the observer returns quota when the object
#            is gone, not admission
mode := "reserve" if {
	operation in {"CREATE", "UPDATE"}
	request_uid != ""
	not dry_run
} else := "check" if {
	operation in {"CREATE", "UPDATE"}
} else := "audit" if {
	operation == ""
} else := "none"

# A retried or re-evaluated request finds its own reservation under the same
# id, so it never counts twice. An UPDATE reserves only its growth, under
# `<uid>/<generation>/<growth>`: the new object's metadata.generation, which
# the API server bumps before validating admission (0 for a kind without
# one), and the amount. The observer folds that reservation once it has
# evaluated the object at that generation or later, and lets it expire when
# the object never reaches it (an update that a later webhook rejected), so a
# rejected update never counts. The growth is part of the id because a
# rejected update never persists its generation: the next update gets the
# same number, and must not find the rejected one's smaller reservation.
claim_id(_) := object_uid if {
	operation == "CREATE"
}

claim_id(n) := sprintf("%s/%d/%d", [object_uid, object_generation, n]) if {
	operation != "CREATE"
}

object_generation := object.get(obj, ["metadata", "generation"], 0)

object_ref := {
	"apiGroup": object_group_kind[0],
	"kind": object_group_kind[1],
	"namespace": object.get(obj, ["metadata", "namespace"], object.get(review, "namespace", "")),
	"name": object.get(obj, ["metadata", "name"], object.get(review, "name", "")),
	"uid": object_uid,
}

# The kind of the object counted: the reviewed kind, or a Scale's workload.
object_group_kind := [object.get(t, "apiGroup", ""), t.kind] if {
	is_scale
	t := scale_target
} else := [object.get(review, ["kind", "group"], ""), object.get(review, ["kind", "kind"], "")]

# ---------------------------------------------------------------------------
# The scale subresource
#
# `kubectl scale` and a HorizontalPodAutoscaler update a workload's replicas
# through its scale subresource. Gatekeeper reviews that as an UPDATE of an
# autoscaling/v1 Scale (object and oldObject), matched by a constraint whose
# match.kinds include autoscaling/Scale; input.review.resource names the
# workload's resource (apps/v1 deployments) and subResource is "scale". The
# Scale carries the workload's name, namespace, uid and resourceVersion (not
# its generation, labels or pod template) and spec.replicas.
#
# A constraint checks the Scales of the kinds its parameters.scaleTargets
# list ({apiGroup, kind, resource}; resource defaults to the kind in lower
# case plus "s": deployments, replicasets, statefulsets,
# replicationcontrollers). Other Scales, and Scales that do not add replicas,
# are not its business: no violation. For a listed kind the library reviews
# the scale as an UPDATE of the workload itself, taken from Gatekeeper's
# synced inventory: obj is the workload with the new Scale's replicas (at
# parameters.amount.replicasPath, default spec.replicas) and the generation
# the API server gives it (a replicas change is a spec change: the stored
# generation plus one), old_obj the workload with the old replicas. So the
# growth, the claim id `<uid>/<generation>/<growth>` the observer folds, and
# the denial are those of the equivalent update of spec.replicas.
#
# The synced copy must be the stored version (its resourceVersion equal to
# the old Scale's): a stale copy could carry another pod template or
# generation, and the check would not be exact. A workload missing from the
# inventory, or a stale copy, is a violation (fail closed) naming what to
# sync or asking to retry; Gatekeeper's sync catches up within moments.

is_scale if {
	review.kind.group == "autoscaling"
	review.kind.kind == "Scale"
}

scale_replicas(s) := object.get(s, ["spec", "replicas"], 0)

scale_name := object.get(review_object, ["metadata", "name"], object.get(review, "name", ""))

scale_namespace := object.get(review_object, ["metadata", "namespace"], object.get(review, "namespace", ""))

# The parameters.scaleTargets entry for the reviewed resource, if any.
scale_target := [t |
	some t in object.get(params, "scaleTargets", [])
	is_object(t)
	object.get(t, "apiGroup", "") == object.get(review, ["resource", "group"], "")
	scale_target_resource(t) == object.get(review, ["resource", "resource"], "")
][0]

scale_target_resource(t) := object.get(t, "resource", sprintf("%ss", [lower(t.kind)]))

# A Scale this constraint checks: a listed kind, more replicas, an admission.
scale_checked if {
	mode in {"reserve", "check"}
	scale_replicas(review_object) > scale_replicas(review_old_object)
	scale_target
}

# The workload as Gatekeeper's inventory holds it (any synced version of
# its group), and the same only when it is the stored version.
scale_synced := [o |
	some gv, kinds in data.inventory.namespace[scale_namespace]
	api_group_of(gv) == object.get(scale_target, "apiGroup", "")
	o := kinds[scale_target.kind][scale_name]
][0]

scale_parent := p if {
	p := scale_synced
	object.get(p, ["metadata", "resourceVersion"], "") == object.get(review_old_object, ["metadata", "resourceVersion"], "")
}

api_group_of(gv) := parts[0] if {
	parts := split(gv, "/")
	count(parts) == 2
} else := ""

# Why a checked Scale cannot be reviewed; undefined when it can.
scale_error := sprintf("cannot check the scale of %s %q: it is not in Gatekeeper's synced inventory (sync %s %s)", [scale_target.kind, scale_name, scale_group_version, scale_target.kind]) if {
	not scale_synced
} else := sprintf("cannot check the scale of %s %q: Gatekeeper's synced copy is at resourceVersion %s, the %s at %s; retry", [
	scale_target.kind, scale_name,
	object.get(scale_synced, ["metadata", "resourceVersion"], ""), scale_target.kind,
	object.get(review_old_object, ["metadata", "resourceVersion"], ""),
]) if {
	not scale_parent
}

scale_group_version := v if {
	object.get(scale_target, "apiGroup", "") == ""
	v := object.get(review, ["resource", "version"], "v1")
} else := sprintf("%s/%s", [scale_target.apiGroup, object.get(review, ["resource", "version"], "v1")])

# The workload at the replicas of Scale s and at generation g.
scaled_parent(s, g) := json.patch(scale_parent, [
	{"op": "add", "path": scale_replicas_pointer, "value": scale_replicas(s)},
	{"op": "add", "path": "/metadata/generation", "value": g},
])

scale_replicas_pointer := concat("", [sprintf("/%s", [replace(replace(p, "~", "~0"), "/", "~1")]) |
	some p in object.get(params, ["amount", "replicasPath"], ["spec", "replicas"])
])

# ---------------------------------------------------------------------------
# The namespace and its labels

is_namespace_object if {
	object.get(review, ["kind", "group"], "") == ""
	object.get(review, ["kind", "kind"], "") == "Namespace"
}

# The namespace the object counts against; a Namespace counts against itself.
namespace_name := object.get(obj, ["metadata", "name"], "") if {
	is_namespace_object
} else := ns if {
	ns := object.get(obj, ["metadata", "namespace"], "")
	ns != ""
} else := object.get(review, "namespace", "")

# The namespace's labels: a Namespace's own; else the namespace object that
# Gatekeeper's webhook attaches to the review (fresh from its cache or the
# API server); else Gatekeeper's synced inventory. Undefined when none knows
# the namespace.
namespace_labels := object.get(obj, ["metadata", "labels"], {}) if {
	is_namespace_object
} else := labels if {
	ns := review.namespaceObject
	is_object(ns)
	ns.metadata.name == namespace_name
	labels := object.get(ns, ["metadata", "labels"], {})
} else := labels if {
	ns := data.inventory.cluster.v1.Namespace[namespace_name]
	labels := object.get(ns, ["metadata", "labels"], {})
}

# consumer_label_key is api/v1alpha1.ConsumerLabelKey: the namespace label
# naming a namespace's consumer of a kind.
consumer_label_key(api_group, kind) := sprintf("%s/%s", [group_or_core(api_group), lower(kind)])

group_or_core(g) := g if g != ""

else := "quota.miloapis.com"

# ---------------------------------------------------------------------------
# Scopes: one request per parameters.consumers entry, all or nothing.

consumer_entries := object.get(params, "consumers", [{"kind": "Namespace"}])

scopes := [scope(i, e) | some i, e in consumer_entries]

scope(i, e) := {"error": msg} if {
	not is_object(e)
	msg := sprintf("parameters.consumers[%d]: must be an object", [i])
} else := {"error": msg} if {
	object.get(e, "kind", "") == ""
	msg := sprintf("parameters.consumers[%d].kind: required", [i])
} else := {"error": msg} if {
	resource_type(e) == ""
	msg := sprintf("parameters.resourceType: required (or parameters.consumers[%d].resourceType)", [i])
} else := r if {
	c := resolve_consumer(e)
	r := object.union(c, {"resourceType": resource_type(e), "dimensions": dimensions(e)})
}

resource_type(e) := object.get(e, "resourceType", object.get(params, "resourceType", ""))

dimensions(e) := object.union(object.get(params, "dimensions", {}), object.get(e, "dimensions", {}))

is_namespace_kind(e) if {
	object.get(e, "apiGroup", "") == ""
	e.kind == "Namespace"
}

entry_label_key(e) := object.get(e, "labelKey", consumer_label_key(object.get(e, "apiGroup", ""), e.kind))

consumer(e, name) := {
	"apiGroup": object.get(e, "apiGroup", ""),
	"kind": e.kind,
	"name": name,
	"namespace": object.get(e, "namespace", ""),
}

# A fixed name wins; kind Namespace is the object's namespace; any other kind
# is named by a label on that namespace.
resolve_consumer(e) := {"consumer": consumer(e, e.name)} if {
	object.get(e, "name", "") != ""
} else := {"consumer": consumer(e, namespace_name)} if {
	is_namespace_kind(e)
	namespace_name != ""
} else := {"error": msg} if {
	is_namespace_kind(e)
	msg := sprintf("cannot count %s %q against a namespace: it is cluster-scoped", [object_ref.kind, object_ref.name])
} else := {"error": msg} if {
	namespace_name == ""
	msg := sprintf("cannot find the %s of %s %q: it is cluster-scoped, so no namespace label %q names one", [e.kind, object_ref.kind, object_ref.name, entry_label_key(e)])
} else := {"consumer": consumer(e, name)} if {
	name := namespace_labels[entry_label_key(e)]
	name != ""
} else := {"error": msg} if {
	not namespace_labels
	msg := sprintf("cannot find the %s of namespace %q: the namespace is not in Gatekeeper's synced inventory (sync v1 Namespace)", [e.kind, namespace_name])
} else := {"error": msg} if {
	msg := sprintf("cannot find the %s of namespace %q: it has no label %q", [e.kind, namespace_name, entry_label_key(e)])
}

config_errors contains "parameters.consumers: must not be empty" if count(consumer_entries) == 0

config_errors contains s.error if {
	some s in scopes
	s.error
}

# ---------------------------------------------------------------------------
# The claim

# claim(n, total) reserves n in every scope's bucket. For an UPDATE, n is
# the growth and total what the object counts once the update is in place:
# the observer folds the reservation only once it counts the object at total
# or more, so an update in flight stays reserved even where the generation
# cannot tell (a kind without metadata.generation, or an amount read from
# metadata). 0 for a CREATE.
claim(n, total) := object.union(
	{
		"id": claim_id(n),
		"object": object_ref,
		"requests": [object.union(request(s, n), {"total": total}) | some s in scopes],
		"policyVersion": policy_version,
	},
	claim_view,
)

# A claim with a metadata field has a ResourceClaim view per consumer
# (written by the manager's observer): only with parameters.claimViews,
# since each view costs two API writes per object.
claim_view := {"metadata": {}} if {
	params.claimViews == true
} else := {}

# The constraint's policy version, stamped into its parameters by the
# manager: quota.reserve denies while the observer has not counted the
# existing objects under it (a new or changed constraint; package counted).
policy_version := object.get(params, "policyVersion", "")

request(s, amount) := {
	"consumer": s.consumer,
	"resourceType": s.resourceType,
	"amount": amount,
	"dimensions": s.dimensions,
}

query(s) := {"consumer": s.consumer, "resourceType": s.resourceType, "dimensions": s.dimensions}

# ---------------------------------------------------------------------------
# Violations

# violations(amount, old_amount) is the set of {msg, details} for
# input.review, for an object that asks for amount (old_amount before an
# UPDATE; ignored otherwise). Every failure to count is a violation: a quota
# check that cannot decide denies.
violations(amount, old_amount) := set() if {
	is_scale
	not scale_checked
} else := {config_violation(m)} if {
	is_scale
	m := scale_error
} else := {undecided(m)} if {
	m := selection_undecided
} else := set() if {
	not in_scope(obj)
} else := admission_violations(requested(amount, scoped_old(old_amount)), update_total(amount)) if {
	mode in {"reserve", "check"}
} else := audit_violations if {
	mode == "audit"
} else := set()

requested(amount, _) := amount if operation == "CREATE"

requested(amount, old_amount) := growth(amount, old_amount) if operation == "UPDATE"

growth(amount, old_amount) := amount - old_amount if {
	is_number(amount)
	is_number(old_amount)
} else := amount if {
	not is_number(amount)
} else := old_amount

# What an UPDATE's object counts once the update is in place (claim's total).
update_total(amount) := amount if {
	operation == "UPDATE"
	is_number(amount)
} else := 0

# ---------------------------------------------------------------------------
# Scope by label
#
# parameters.labelSelector (a metav1.LabelSelector) chooses the objects the
# constraint counts, applied by the library to the object before and after
# an UPDATE: an update that labels an object into scope counted nothing
# before, so it is charged its whole amount, like a create. Gatekeeper's
# match.labelSelector cannot say that (the template never sees the
# constraint's match, and Gatekeeper reviews an update whichever side
# matches), so the manager refuses it on quota constraints. An object out of
# scope counts nothing, at admission and in the observer alike.
in_scope(o) if {
	not params.labelSelector
} else if {
	quota.selects(params.labelSelector, object.get(o, ["metadata", "labels"], {}))
}

# Why the selector could not be applied to the object or the one before an
# UPDATE (see undecided); undefined when it could.
selection_undecided := [r |
	params.labelSelector
	some o in [obj, old_obj]
	r := quota.selects(params.labelSelector, object.get(o, ["metadata", "labels"], {}))
	is_string(r)
][0]

# What the object before an UPDATE counted: nothing when it was out of scope.
scoped_old(n) := n if {
	in_scope(old_obj)
} else := 0

admission_violations(n, total) := {amount_violation(n)} if {
	not is_number(n)
} else := {amount_violation(n)} if {
	n != floor(n)
} else := set() if {
	n <= 0
} else := {config_violation(m) | some m in config_errors} if {
	count(config_errors) > 0
} else := {uid_violation} if {
	mode == "reserve"
	object_uid == ""
} else := decision_violations(quota.reserve(claim(n, total))) if {
	mode == "reserve"
} else := check_violations(n)

# claim_violations(requests, metadata) is the set of {msg, details} for
# input.review, for a template that states the claim itself (QuotaClaimPolicy:
# what a ClaimCreationPolicy renders): requests is
# [{consumer, resourceType, amount, dimensions}], taken all or nothing,
# metadata the {name, generateName, namespace, labels, annotations} of the
# claim's ResourceClaim view ({} for none). Only a CREATE claims, as with
# QuotaEntity: it reserves the requests as one claim keyed by the object's
# uid, a dry run checks them read-only, audit reports their buckets when
# over the limit; any other operation counts nothing.
claim_violations(requests, metadata) := set() if {
	count(requests) == 0
} else := {uid_violation} if {
	mode == "reserve"
	operation == "CREATE"
	object_uid == ""
} else := decision_violations(quota.reserve({
	"id": object_uid,
	"object": object_ref,
	"requests": requests,
	"metadata": metadata,
	"policyVersion": policy_version,
})) if {
	mode == "reserve"
	operation == "CREATE"
} else := requests_check_violations(requests) if {
	mode == "check"
	operation == "CREATE"
} else := requests_audit_violations(requests) if {
	mode == "audit"
} else := set()

# growth_requests(new, old) is one request per bucket whose amount grows
# from the requests old to the requests new: the growth as amount, and what
# the object counts there once the update is in place as total (see claim).
growth_requests(new, old) := [object.union(q, {"amount": n - o, "total": n}) |
	some q, n in bucket_amounts(new)
	o := object.get(bucket_amounts(old), [q], 0)
	n > o
]

# growth_violations(requests, metadata) is the set of {msg, details} for an
# UPDATE of an object whose template states its claim itself (QuotaClaimPolicy):
# requests, from growth_requests, are reserved as one claim under
# `<uid>/<generation>/<growth>` (the growth summed over the buckets), a dry
# run checks them read-only.
growth_violations(requests, metadata) := set() if {
	count(requests) == 0
} else := {uid_violation} if {
	mode == "reserve"
	object_uid == ""
} else := decision_violations(quota.reserve({
	"id": claim_id(sum([r.amount | some r in requests])),
	"object": object_ref,
	"requests": requests,
	"metadata": metadata,
	"policyVersion": policy_version,
})) if {
	mode == "reserve"
} else := requests_check_violations(requests) if {
	mode == "check"
} else := set()

decision_violations(d) := {undecided(d)} if {
	is_string(d)
} else := set() if {
	d.granted
} else := vs if {
	vs := {denial(r) | some r in d.requests; r.reason == "QuotaExceeded"}
	count(vs) > 0
} else := {{"msg": sprintf("quota denied: %s", [d.message]), "details": {"decision": d}}}

check_violations(n) := requests_check_violations([request(s, n) | some s in scopes])

# What quota.reserve would answer for requests, from quota.usage: the same
# numbers and the same message as ledger.RequestDecision's, without holding
# anything.
requests_check_violations(requests) := {v |
	some q, n in bucket_amounts(requests)
	v := check_violation(q, n, quota.usage(q))
}

check_violation(q, n, u) := undecided(u) if {
	is_string(u)
} else := denial(r) if {
	u.available < n
	r := object.union(u, object.union(q, {"amount": n, "message": denied_message(n, q.resourceType, u)}))
}

# The buckets requests ask of, each with the sum asked: the ledger sums the
# requests of one claim for one bucket.
bucket_amounts(requests) := {q: sum([r.amount | some r in requests; query(r) == q]) |
	some r in requests
	q := query(r)
}

denied_message(n, resource_type, u) := sprintf(
	"requested %d of %s, available %d of %d (allocated %d, reserved %d)",
	[n, resource_type, u.available, u.limit, u.allocated, u.reserved],
)

audit_violations := {config_violation(m) | some m in config_errors} if {
	count(config_errors) > 0
} else := set() if {
	# Audit reviews every object: when no bucket of the constraint's
	# resource types is over its limit (an index lookup), reading this
	# object's buckets could only find each within it.
	not any_over_limit
} else := requests_audit_violations([request(s, 0) | some s in scopes])

any_over_limit if {
	some e in consumer_entries
	is_object(e)
	quota.over_limit(resource_type(e))
}

# A lowered limit never revokes what is held, so a bucket can sit above its
# limit; audit is where that becomes visible.
requests_audit_violations(requests) := {v |
	not params.reportOverLimit == false
	some q, _ in bucket_amounts(requests)
	v := audit_violation(q, quota.usage(q))
}

audit_violation(q, u) := undecided(u) if {
	is_string(u)
} else := v if {
	u.allocated + u.reserved > u.limit
	v := {
		"msg": sprintf("%s is over its quota of %s: allocated %d, reserved %d, limit %d", [
			display(q.consumer, q.dimensions), q.resourceType,
			u.allocated, u.reserved, u.limit,
		]),
		"details": details(q, u, 0),
	}
}

# A denial: the consumer, the numbers in base units (exact, as the ledger
# words them), the same numbers in the registration's display unit when it
# has one, and where the tenant reads them. r is a request of quota.reserve's
# decision, or quota.usage's answer with the query, amount and message.
denial(r) := {
	"msg": sprintf("quota exceeded for %s: %s%s%s", [
		display(r.consumer, r.dimensions), r.message,
		display_units_clause(r), see_clause(r),
	]),
	"details": details(r, r, r.amount),
}

# The numbers again in the display unit, when the registration declares one
# other than the base unit (as v1alpha1.Units.HasDisplay), written exactly by
# quota.display ("0.5", or "10/3" when the decimal would not end):
#   "; in cores (1000 millicores each): requested 0.5, available 0 of 8 (allocated 7.5, reserved 0.5)"
# Empty when the units are unknown (no active registration, or a plugin that
# has not loaded them): the base-unit numbers are the decision's own.
display_units_clause(r) := sprintf("; in %s (%d %s each): requested %s, available %s of %s (allocated %s, reserved %s)", [
	u.displayUnit, u.unitConversionFactor, object.get(u, "baseUnit", "base units"),
	quota.display(r.amount, u), quota.display(r.available, u), quota.display(r.limit, u),
	quota.display(r.allocated, u), quota.display(r.reserved, u),
]) if {
	u := object.get(r, "units", {})
	has_display_unit(u)
} else := ""

has_display_unit(u) if {
	object.get(u, "displayUnit", "") != ""
	object.get(u, "unitConversionFactor", 0) >= 1
	not display_is_base(u)
}

display_is_base(u) if {
	u.displayUnit == object.get(u, "baseUnit", "")
	u.unitConversionFactor == 1
}

# Where the tenant reads the numbers: the consumer's EffectiveResourceGrant,
# which the manager keeps in every namespace of the consumer (so in the
# object's), and the kubectl plugin's table of them. A consumer the object's
# namespace does not belong to (one named in the constraint's parameters), a
# cluster-scoped object, or a Namespace being created (its
# EffectiveResourceGrants do not exist yet) points to the whole cluster's
# table.
see_clause(r) := sprintf("; see EffectiveResourceGrant %s/%s (kubectl quota usage -n %s)", [namespace_name, erg, namespace_name]) if {
	in_object_namespace(r.consumer)
	erg := object.get(r, "effectiveResourceGrant", "")
	erg != ""
} else := sprintf("; see kubectl quota usage -n %s", [namespace_name]) if {
	in_object_namespace(r.consumer)
} else := "; see kubectl quota usage -A"

# The object's namespace belongs to consumer c, as the manager decides where
# EffectiveResourceGrants go (v1alpha1.NamespaceBelongsTo, and a namespaced
# consumer's own namespace): it is c, its label for c's kind names c, or c
# lives in it.
in_object_namespace(c) if {
	not is_namespace_object
	namespace_name != ""
	namespace_belongs_to(c)
}

namespace_belongs_to(c) if {
	object.get(c, "apiGroup", "") == ""
	c.kind == "Namespace"
	c.name == namespace_name
}

namespace_belongs_to(c) if {
	not is_namespace_kind(c)
	namespace_labels[consumer_label_key(object.get(c, "apiGroup", ""), c.kind)] == c.name
}

namespace_belongs_to(c) if {
	object.get(c, "namespace", "") == namespace_name
}

details(s, u, n) := {
	"consumer": s.consumer,
	"resourceType": s.resourceType,
	"dimensions": s.dimensions,
	"requested": n,
	"limit": u.limit,
	"allocated": u.allocated,
	"reserved": u.reserved,
	"available": u.available,
	"bucket": u.bucket,
}

display(c, dims) := sprintf("%s%s", [consumer_name(c), dimension_suffix(dims)])

consumer_name(c) := sprintf("%s %s/%s", [c.kind, c.namespace, c.name]) if {
	c.namespace != ""
} else := sprintf("%s %s", [c.kind, c.name])

dimension_suffix(dims) := "" if {
	count(dims) == 0
} else := sprintf(" {%s}", [concat(",", sort([sprintf("%s=%s", [k, v]) | some k, v in dims]))])

config_violation(m) := {"msg": sprintf("quota: %s", [m]), "details": {}}

# undecided(answer) is the denial when a builtin answered a string where a
# decision, a usage, a selection or an amount was asked: the reason it could
# not answer, in plain words. Only the stock-Gatekeeper form of the builtins
# (lib.quotabuiltins, which asks quotakeeper's External Data provider)
# answers so: a call that gets no answer must deny, and Rego has no halt, so
# it answers the reason instead of leaving the call undefined, which would
# leave the violation undefined and admit. The builtins linked into
# Gatekeeper halt instead, and never answer a string here.
undecided(answer) := {"msg": answer, "details": {}}

uid_violation := {
	"msg": sprintf("quota: cannot reserve for %s %q: metadata.uid is empty (the API server sets it before validating admission)", [object_ref.kind, object_ref.name]),
	"details": {},
}

amount_violation(n) := {"msg": sprintf("quota: cannot count %s %q: %s", [object_ref.kind, object_ref.name, amount_error(n)]), "details": {}}

amount_error(n) := n if {
	is_string(n)
} else := n.error if {
	is_object(n)
	n.error
} else := sprintf("the amount must be a whole number, got %v", [n])

# ---------------------------------------------------------------------------
# Amounts (QuotaAllocation)

# object_amount(obj) is what obj asks for in the registration's base unit,
# per parameters.amount: {path} (a quantity at that path; absent counts 0)
# or {resource, from} (what one of its pods holds of resource, from its
# "requests" (the default) or "limits", by Kubernetes' own rules: quota.pod_resources,
# which counts pod-level resources, requests defaulted from limits, init
# containers and sidecars as the scheduler and in-tree ResourceQuota do),
# times the number at replicasPath when set (absent counts 1), converted
# with unit (a quantity suffix: "m" for millicores, "" for bytes or counts,
# "Mi", ...), rounded up. On a bad specification, or an object without a pod
# spec, it is {"error": msg}, which violations reports: an amount that
# cannot be told denies, never counts 0.
object_amount(o) := amount_of(o, object.get(params, "amount", {}))

amount_of(o, spec) := {"error": "parameters.amount: set path or resource"} if {
	not spec.path
	not spec.resource
} else := {"error": sprintf("parameters.amount.from: must be \"requests\" or \"limits\", got %v", [spec.from])} if {
	spec.resource
	not object.get(spec, "from", "requests") in {"requests", "limits"}
} else := {"error": sprintf("replicas at %v: must be a whole number, got %v", [spec.replicasPath, r])} if {
	spec.replicasPath
	r := object.get(o, spec.replicasPath, 1)
	not is_whole(r)
} else := p if {
	p := per_object(o, spec)
	is_object(p)
} else := per_object(o, spec) * object.get(o, spec.replicasPath, 1) if {
	spec.replicasPath
} else := per_object(o, spec)

is_whole(n) if {
	is_number(n)
	n >= 0
	n == floor(n)
}

unit(spec) := object.get(spec, "unit", "")

per_object(o, spec) := quota.quantity(v, unit(spec)) if {
	spec.path
	v := object.get(o, spec.path, null)
	v != null
} else := 0 if {
	spec.path
} else := per_pod(quota.pod_resources(o), spec)

per_pod(r, spec) := {"error": r} if {
	is_string(r)
} else := r if {
	r.error
} else := quota.quantity(q, unit(spec)) if {
	q := r[object.get(spec, "from", "requests")][spec.resource]
} else := 0

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
# The decision is quota.review's, in Go ("The decision" below): it builds a
# claim from input.review and input.parameters, and reserves it with the
# ledger only for a real admission: operation CREATE (or UPDATE
# where the amount grows: the growth is reserved), a non-empty request uid
# (audit sends none) and not a dry run. Dry runs are checked read-only with
# quota.usage and get the message the real request would get; audit never
# reserves and reports consumers over their limit. An update of a scale
# subresource (kubectl scale, an HPA) is reviewed as the update of the
# workload's replicas, for the kinds parameters.scaleTargets lists (see "The
# scale subresource"). A reservation only covers
# the in-flight window: quotakeeper's observer evaluates the same template on
# every live object (quota.review then records instead of reserving) and
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

# mode is what this review does with quota (quota.review decides it the
# same way; templates that render their own claim read it):
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
# The decision: quota.review
#
# What the review asks of quota is decided in Go by quota.review (the
# consumers of parameters.consumers, parameters.labelSelector before and
# after an UPDATE, the mode, the claim and its id, quota.reserve or
# quota.usage, every message): one evaluation, the same in Gatekeeper, in
# the External Data provider and in quotakeeper's observer. It reads the
# review and the parameters itself (the object's metadata, the kind, the
# namespace and the labels of the namespace object Gatekeeper attaches);
# the library adds only what Rego alone can read, from Gatekeeper's synced
# inventory: a Scale's workload, and the namespace's labels when the review
# carries no namespace object. Reading the rest in Rego cost more than the
# decision (issue 23's profiles).

review_facts := {
	"review": review,
	"parameters": params,
	"scale": scale_facts,
	"inventoryNamespaceLabels": inventory_namespace_labels,
}

# The workload a checked Scale stands for (violations calls quota.review
# only for those), null for any other review: the metadata quota.review
# reads (builtins.ReviewRead), not the workload, which an External Data key
# would carry whole.
scale_facts := {
	"kind": {"apiGroup": object.get(scale_target, "apiGroup", ""), "kind": scale_target.kind},
	"object": {"metadata": read_metadata(obj)},
	"oldObject": {"metadata": read_metadata(old_obj)},
} if {
	is_scale
} else := null

read_metadata(o) := object.filter(object.get(o, "metadata", {}), ["uid", "name", "namespace", "generation", "labels"])

# The namespace's labels in the inventory, looked up only when the review
# carries no namespace object (Gatekeeper attaches one to every admission
# review of a namespaced object; the frameworks' client an empty one when
# it has none); null when it does, or the inventory lacks the namespace.
inventory_namespace_labels := null if {
	review.namespaceObject.metadata.name != ""
} else := labels if {
	labels := object.get(data.inventory.cluster.v1.Namespace[namespace_name], ["metadata", "labels"], {})
} else := null

# decided(answer) is quota.review's violations as a set, or the denial when
# it could not answer (undecided).
decided(answer) := {undecided(answer)} if {
	is_string(answer)
} else := {v | some v in answer}

# violations(amount, old_amount) is the set of {msg, details} for
# input.review, for an object that asks for amount (old_amount before an
# UPDATE; ignored otherwise): a CREATE reserves amount, an UPDATE its growth
# under `<uid>/<generation>/<growth>`, against every consumer, all or
# nothing. Every failure to count is a violation: a quota check that cannot
# decide denies.
violations(amount, old_amount) := set() if {
	is_scale
	not scale_checked
} else := {config_violation(m)} if {
	is_scale
	m := scale_error
} else := set() if {
	operation == "" # audit
	not audit_asks
} else := decided(quota.review(review_facts, {"amount": amount, "oldAmount": old_amount}))

# Audit reviews every object: quota.review is asked only when a bucket of
# one of the constraint's resource types is over its limit (quota.over_limit,
# an index lookup; in the stock mode one External Data call a second, where
# quota.review would be one per object), or when an entry of
# parameters.consumers cannot be resolved for the object, which it reports.
audit_asks if count(consumer_entries) == 0

audit_asks if {
	some e in consumer_entries
	not resolvable(e)
}

audit_asks if {
	some e in consumer_entries
	quota.over_limit(resource_type(e))
}

consumer_entries := object.get(params, "consumers", [{"kind": "Namespace"}])

resource_type(e) := object.get(e, "resourceType", object.get(params, "resourceType", ""))

# An entry quota.review resolves to a consumer without a configuration
# error: a fixed name, the object's namespace, or a label on it.
resolvable(e) if {
	is_object(e)
	object.get(e, "kind", "") != ""
	resource_type(e) != ""
	entry_consumer_known(e)
}

entry_consumer_known(e) if object.get(e, "name", "") != ""

entry_consumer_known(e) if {
	namespace_kind(e)
	namespace_name != ""
}

entry_consumer_known(e) if {
	not namespace_kind(e)
	namespace_labels[object.get(e, "labelKey", consumer_label_key(object.get(e, "apiGroup", ""), e.kind))] != ""
}

namespace_kind(e) if {
	object.get(e, "apiGroup", "") == ""
	e.kind == "Namespace"
}

# claim_violations(requests, metadata) is the set of {msg, details} for
# input.review, for a template that states the claim itself (QuotaClaimPolicy:
# what a ClaimCreationPolicy renders): requests is
# [{consumer, resourceType, amount, dimensions}], taken all or nothing,
# metadata the {name, generateName, namespace, labels, annotations} of the
# claim's ResourceClaim view ({} for none). Only a CREATE claims, keyed by
# the object's uid; a dry run checks read-only, audit reports the buckets
# over their limit; any other operation counts nothing.
claim_violations(requests, metadata) := decided(quota.review(review_facts, {"claim": {"requests": requests, "metadata": metadata}}))

# growth_violations(requests, old_requests, metadata) is the set of {msg,
# details} for an UPDATE of an object whose template states its claim
# itself: per bucket, what grows from old_requests to requests is reserved
# as one claim under `<uid>/<generation>/<growth>`, a dry run checks it.
growth_violations(requests, old_requests, metadata) := decided(quota.review(review_facts, {"growth": {"requests": requests, "oldRequests": old_requests, "metadata": metadata}}))

config_violation(m) := {"msg": sprintf("quota: %s", [m]), "details": {}}

# undecided(answer) is the denial when a builtin answered a string where a
# decision, a review or an amount was asked: the reason it could not
# answer, in plain words. Only the stock-Gatekeeper form of the builtins
# (lib.quotabuiltins, which asks quotakeeper's External Data provider)
# answers so: a call that gets no answer must deny, and Rego has no halt, so
# it answers the reason instead of leaving the call undefined, which would
# leave the violation undefined and admit. The builtins linked into
# Gatekeeper halt instead, and never answer a string here.
undecided(answer) := {"msg": answer, "details": {}}

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

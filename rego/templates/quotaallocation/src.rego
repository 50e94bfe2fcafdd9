# QuotaAllocation counts an amount taken from the object (parameters.amount:
# a quantity at a path, or a container resource summed over the pod template,
# times replicas), converted into the registration's base unit. A create
# reserves the amount; an update reserves only its growth.
package quotaallocation

import data.lib.quota as quotalib

violation contains v if {
	some v in quotalib.violations(quotalib.object_amount(quotalib.obj), old_amount)
}

old_amount := quotalib.object_amount(quotalib.old_obj) if {
	quotalib.operation == "UPDATE"
} else := 0

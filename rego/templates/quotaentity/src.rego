# QuotaEntity counts objects: every admitted create of a matched kind
# reserves 1 against each consumer in parameters.consumers, all or nothing.
# Updates never change the count; deletes return it through the controllers.
package quotaentity

import data.lib.quota as quotalib

violation contains v if {
	some v in quotalib.violations(1, 1)
}

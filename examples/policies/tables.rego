# Tables by name: the finance schema is not backfilled on Fridays, when the week's reports close.
package main

import rego.v1

deny contains msg if {
	contains(input.target.table, ".finance.")
	time.weekday(time.parse_rfc3339_ns(input.created_at)) == "Friday"
	msg := sprintf("%s is a finance table, and finance tables are not backfilled on Fridays", [input.target.table])
}

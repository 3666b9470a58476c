# A window far in the past rewrites days that reports were built on and people have read: say so
# after 90 days, and require an approval after a year.
package main

import rego.v1

day_ns := ((24 * 60) * 60) * 1000000000

window_age_days := floor((time.parse_rfc3339_ns(input.created_at) - time.parse_rfc3339_ns(sprintf("%sT00:00:00Z", [input.window.start]))) / day_ns)

warn contains msg if {
	window_age_days > 90
	msg := sprintf("the window starts %d days before the plan: tell the owners of the reports that cover %s..%s", [window_age_days, input.window.start, input.window.end])
}

deny contains msg if {
	window_age_days > 365
	not input.unfreeze.approved_by
	msg := sprintf("the window starts %d days before the plan, more than a year: a plan that old needs an approval ([guards] unfreeze)", [window_age_days])
}

# Frozen periods (`bf freeze`): bf itself refuses rewriting frozen days without `[guards] unfreeze`;
# this policy makes the approval visible to every reviewer, and requires a ticket of the finance
# project (FIN-…) for it.
package main

import rego.v1

warn contains msg if {
	some period in input.frozen
	msg := sprintf("rewrites days frozen through %s (%s), approved by %s (%s)", [period.to, period.reason, input.unfreeze.approved_by, input.unfreeze.ticket])
}

deny contains msg if {
	count(input.frozen) > 0
	not startswith(object.get(input, ["unfreeze", "ticket"], ""), "FIN-")
	msg := "rewriting frozen days needs a FIN- ticket in [guards] unfreeze"
}

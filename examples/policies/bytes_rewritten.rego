# What a backfill rewrites, in bytes and files (the saved plan's blast_radius): a plan that writes
# more than 50 GiB is split into smaller windows; one that replaces many files is worth a look.
package main

import rego.v1

gib := ((1024 * 1024) * 1024)

deny contains msg if {
	input.blast_radius.bytes_added > 50 * gib
	msg := sprintf("the backfill writes %d GiB, more than 50 GiB: split the window into plans of their own", [round(input.blast_radius.bytes_added / gib)])
}

warn contains msg if {
	input.blast_radius.files_removed > 1000
	msg := sprintf("the backfill replaces %d files: check the table is partitioned by the date", [input.blast_radius.files_removed])
}

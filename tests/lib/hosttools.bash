# shellcheck shell=bash
# hosttools.bash - the client's tools on the test's config $C in the
# client namespace (sshhosts.bash in_client), as the suites on the SSH
# test hosts use them; loaded after common.bash and sshhosts.bash, whose
# sub, st and field run them outside the namespace.
#   sub ARG...     cardbaton-submit
#   st ARG...      cardbaton-status
#   field ID KEY   that key of job ID's status --json element
#   state ID       its state
#   record ID      its record, wherever it is in the spool $T/spool
sub() { in_client cardbaton-submit --config "$C" "$@"; }
st() { in_client cardbaton-status --config "$C" "$@"; }
field() { st --json "$1" | json "d['jobs'][0]['$2']"; }
state() { field "$1" state; }
record() { cat "$T"/spool/*/"$(printf %010d "$1").job"; }

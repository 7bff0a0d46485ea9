#!/bin/sh
# hook-webhook.sh - an on_finish hook (cardbaton(5)): POST each job that
# ends, its `status --json` element as is, to a URL, with curl(1).
#
# usage (config.yaml; the installed examples are not executable, so sh):
#   on_finish: [sh, /usr/local/share/doc/cardbaton/examples/hook-webhook.sh,
#               https://hooks.example.org/cardbaton]
#
# The daemon runs it once for every job that ends (at least once: a
# daemon that crashed meanwhile runs it again, so a receiver should take
# the same job twice in its stride: "id" and "state" say which), with the
# element on standard input and CARDBATON_JOB_ID, CARDBATON_JOB_STATE and
# CARDBATON_JOB_NAME set, and kills it after 30 s: curl gives up after 25.
# A refused POST (an HTTP error, no connection) fails the hook, which the
# daemon logs in one line with what curl said.

url=${1:?usage: hook-webhook.sh URL}
exec curl --silent --show-error --fail --max-time 25 \
	--header 'Content-Type: application/json' \
	--header "X-CardBaton-Job: ${CARDBATON_JOB_ID:?not run as an on_finish hook}" \
	--data-binary @- --url "$url"

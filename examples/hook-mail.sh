#!/bin/sh
# hook-mail.sh - an on_finish hook (cardbaton(5)): mail a line about each
# job that ends in one of STATES, its `status --json` element as the body.
#
# usage (config.yaml; the installed examples are not executable, so sh):
#   on_finish: [sh, /usr/local/share/doc/cardbaton/examples/hook-mail.sh,
#               you@example.org]                   # failed and lost jobs
#   on_finish: [sh, .../hook-mail.sh, you@example.org, succeeded, failed, cancelled, lost]
#
# The daemon runs it once for every job that ends (at least once: a
# daemon that crashed meanwhile runs it again), with the job's element
# on standard input and CARDBATON_JOB_ID, CARDBATON_JOB_STATE and
# CARDBATON_JOB_NAME set, and kills it after 30 s.  It sends with mail(1)
# when there is one, else with sendmail(8) (PATH, /usr/sbin, /usr/lib);
# with neither it fails, which the daemon logs in one line.

to=${1:?usage: hook-mail.sh ADDRESS [STATE...]}
shift
[ $# -gt 0 ] || set -- failed lost
want=0
for s; do [ "$s" = "${CARDBATON_JOB_STATE:?not run as an on_finish hook}" ] && want=1; done
[ "$want" = 1 ] || { cat > /dev/null; exit 0; }

body=$(cat) || exit 1
subject="cardbaton: job $CARDBATON_JOB_ID${CARDBATON_JOB_NAME:+ ($CARDBATON_JOB_NAME)} $CARDBATON_JOB_STATE"

if command -v mail > /dev/null 2>&1; then
	printf '%s\n' "$body" | mail -s "$subject" -- "$to"
	exit
fi
for sm in "$(command -v sendmail 2> /dev/null)" /usr/sbin/sendmail /usr/lib/sendmail; do
	if [ -n "$sm" ] && [ -x "$sm" ]; then
		# Job names hold no control characters (cardbaton(5)): no header
		# can be smuggled in through the subject.
		printf 'To: %s\nSubject: %s\nContent-Type: application/json\n\n%s\n' \
			"$to" "$subject" "$body" | "$sm" -i -- "$to"
		exit
	fi
done
echo "hook-mail.sh: neither mail nor sendmail is installed" >&2
exit 69

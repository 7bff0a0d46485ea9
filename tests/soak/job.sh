#!/bin/bash
# tests/soak/job.sh SOAK_DIR SECONDS EXIT_CODE - the job that the fault
# runs (tests/soak/soak) submit.  It runs on a test host under the real
# worker and records its own effect in SOAK_DIR, which every host sees
# (the hosts share the machine's file system):
#
#   effects/JOBID   "start AID HOST UUIDS PID MS" when it starts and
#                   "end AID MS" just before it exits (appended with
#                   O_APPEND, one short write each; MS = epoch ms);
#   cards/UUID      for each card in CUDA_VISIBLE_DEVICES, a
#                   non-blocking flock held (by the job and its sleep)
#                   until the job's last process exits;
#   violations      "DOUBLE UUID AID MS" when that flock was already
#                   held: another live job had the same card, i.e. the
#                   card was booked twice.  Nothing else writes it.
#
# The job ID is the middle part of CARDBATON_ATTEMPT_ID (SPOOLID-JOB-N).
# bash, not sh: the card locks need descriptors that bash picks itself
# ({fd}), so that none of those the job inherits from the worker (its
# attempt lock and leases, at small numbers) is ever replaced.
soak=${1:?usage: job.sh SOAK_DIR SECONDS EXIT_CODE}
dur=${2:?}
code=${3:?}
aid=${CARDBATON_ATTEMPT_ID:?not started by cardbaton-worker}
job=${aid#*-}
job=${job%-*}
now() { local t=${EPOCHREALTIME/[.,]/}; echo "${t%???}"; }

printf 'start %s %s %s %s %s\n' "$aid" "${CARDBATON_HOST:-?}" "${CUDA_VISIBLE_DEVICES:--}" \
	"$$" "$(now)" >> "$soak/effects/$job"

IFS=, read -ra cards <<< "${CUDA_VISIBLE_DEVICES:-}"
for u in "${cards[@]}"; do
	case $u in GPU-*) ;; *) continue ;; esac
	exec {fd}>>"$soak/cards/$u"
	if ! flock -n "$fd"; then
		printf 'DOUBLE %s %s %s\n' "$u" "$aid" "$(now)" >> "$soak/violations"
	fi
done

sleep "$dur"
printf 'end %s %s\n' "$aid" "$(now)" >> "$soak/effects/$job"
exit "$code"

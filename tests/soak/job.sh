#!/bin/bash
# tests/soak/job.sh SOAK_DIR SECONDS EXIT_CODE - the job that the fault
# runs (tests/soak/soak) submit.  It runs on a test host under the real
# worker and records its own effect in SOAK_DIR, which every host sees
# (the hosts share the machine's file system):
#
#   effects/JOBID   "start AID HOST UUIDS PID MS ACCOUNT" when it starts
#                   (ACCOUNT: `id -un`, who it runs as) and "end AID MS"
#                   just before it exits (appended with O_APPEND, one
#                   short write each; MS = epoch ms);
#   cards/UUID      for each card in CUDA_VISIBLE_DEVICES, a
#                   non-blocking flock held (by the job and its sleep)
#                   until the job's last process exits;
#   violations      "DOUBLE UUID AID MS" when that flock was already
#                   held: another live job had the same card, i.e. the
#                   card was booked twice.  Nothing else writes it.
#
#   (with a 4th argument share and a 5th N, the job shares its cards:
#   its flock on cards/UUID is a shared one, which an exclusive job's
#   fails on and the other way round (DOUBLE); and it takes one of N
#   slots cards/UUID.sK, "OVERSHARE UUID AID MS" when none is free:
#   more than N sharers on the card at once)
#
#   (with SOAK_USER and SOAK_MAX_GPUS in its environment, a job of a
#   lab's user with that max_gpus: for each card it takes one of the
#   user's SOAK_MAX_GPUS slots users/USER.sK, "OVERLIMIT USER AID MS"
#   when none is free: the user held more cards at once than the limit)
#
#   (with a 4th argument ck, the job is resumable: it polls its pause
#   file; asked, it saves the time it has left in ck/AID, appends
#   "pause AID MS" and exits 75; resumed, it runs what was left)
#
# A --run-as run's jobs run as their owners' accounts: effects/, cards/,
# users/ and ck/ are 1777 there, violations is 0666, and the lock files
# are made by the driver, root's, 0644: every lock file is opened
# read-only (flock needs no more), made first only where it is missing
# (a run as root).  One that cannot be opened is "NOLOCK FILE AID
# ACCOUNT MS" in violations (a fault of the harness, not a double
# booking).
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
me=$(id -un)

printf 'start %s %s %s %s %s %s\n' "$aid" "${CARDBATON_HOST:-?}" "${CUDA_VISIBLE_DEVICES:--}" \
	"$$" "$(now)" "$me" >> "$soak/effects/$job"

# lockfd VAR FILE: VAR = a new descriptor (picked by bash) on FILE,
# opened read-only; 1 (and a NOLOCK line) when it cannot be.
lockfd() {
	local _f
	[ -e "$2" ] || : >> "$2" 2>/dev/null
	if ! { exec {_f}<"$2"; } 2>/dev/null; then
		printf 'NOLOCK %s %s %s %s\n' "$2" "$aid" "$me" "$(now)" >> "$soak/violations"
		return 1
	fi
	printf -v "$1" %s "$_f"
}

IFS=, read -ra cards <<< "${CUDA_VISIBLE_DEVICES:-}"
fd='' sfd='' ufd=''   # set by lockfd (printf -v)
how=
[ "${4:-}" = share ] && how=-s
for u in "${cards[@]}"; do
	case $u in GPU-*) ;; *) continue ;; esac
	if lockfd fd "$soak/cards/$u" && ! flock -n $how "$fd"; then
		printf 'DOUBLE %s %s %s\n' "$u" "$aid" "$(now)" >> "$soak/violations"
	fi
	[ "${4:-}" = share ] || continue
	slot=
	for ((k = 0; k < ${5:?share needs N}; k++)); do
		lockfd sfd "$soak/cards/$u.s$k" || { slot=-; break; }
		if flock -n "$sfd"; then slot=$k; break; fi
		exec {sfd}>&-
	done
	[ -n "$slot" ] || printf 'OVERSHARE %s %s %s\n' "$u" "$aid" "$(now)" >> "$soak/violations"
done

if [ -n "${SOAK_MAX_GPUS:-}" ]; then
	for u in "${cards[@]}"; do
		case $u in GPU-*) ;; *) continue ;; esac
		slot=
		for ((k = 0; k < SOAK_MAX_GPUS; k++)); do
			lockfd ufd "$soak/users/$SOAK_USER.s$k" || { slot=-; break; }
			if flock -n "$ufd"; then slot=$k; break; fi
			exec {ufd}>&-
		done
		[ -n "$slot" ] || printf 'OVERLIMIT %s %s %s\n' "$SOAK_USER" "$aid" "$(now)" >> "$soak/violations"
	done
fi

if [ "${4:-}" = ck ]; then
	# Tenths of a second left: all of DUR, or what the checkpoint says.
	left=${dur/./}
	[ "$dur" = "${dur#*.}" ] && left=$((dur * 10))
	left=$((10#$left))
	if [ -n "${CARDBATON_CHECKPOINT:-}" ]; then left=$(cat "$CARDBATON_CHECKPOINT"); fi
	while [ "$left" -gt 0 ]; do
		if [ -e "$CARDBATON_PAUSE_FILE" ]; then
			echo "$left" > "$soak/ck/$aid"
			printf '{"checkpoint": "%s"}' "$soak/ck/$aid" > "$CARDBATON_CHECKPOINT_READY.tmp"
			mv "$CARDBATON_CHECKPOINT_READY.tmp" "$CARDBATON_CHECKPOINT_READY"
			printf 'pause %s %s\n' "$aid" "$(now)" >> "$soak/effects/$job"
			exit 75
		fi
		sleep 0.1
		left=$((left - 1))
	done
else
	sleep "$dur"
fi
printf 'end %s %s\n' "$aid" "$(now)" >> "$soak/effects/$job"
exit "$code"

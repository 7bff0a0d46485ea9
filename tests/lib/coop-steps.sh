# tests/lib/coop-steps.sh N LOG [VAR...]: a job that keeps the
# checkpoint contract (AGENTS.md), for the suites that pause and resume
# on remote nodes: steps 1..N, each a line "step I" and the values of
# the environment variables VAR... appended to LOG; at the pause file
# it saves the step it reached next to LOG, publishes the marker and
# exits 75; resumed ($SSHGPU_CHECKPOINT), it goes on from there.
n=$1 log=$2 i=0
shift 2
if [ -n "${SSHGPU_CHECKPOINT:-}" ]; then i=$(cat "$SSHGPU_CHECKPOINT"); fi
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	line="step $i"
	for v in "$@"; do eval "line=\"\$line \${$v:-}\""; done
	echo "$line" >> "$log"
	sleep 0.05
	if [ -e "$SSHGPU_PAUSE_FILE" ]; then
		echo "$i" > "$log.ck"
		printf '{"checkpoint": "%s"}\n' "$log.ck" > "$SSHGPU_CHECKPOINT_READY.tmp"
		mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
		exit 75
	fi
done

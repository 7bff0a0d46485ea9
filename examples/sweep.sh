#!/bin/sh
# sweep.sh - submit a hyper-parameter sweep to CardBaton from the shell: one
# single-GPU job per (learning rate, seed), named lr=X/seed=Y.
#
# usage: sweep.sh [EXTRA_TRAIN_ARGS...]
#
# Environment (all optional):
#   CARDBATON  the cardbaton program (default: cardbaton on PATH; point it
#              at a build: CARDBATON=build/cardbaton)
#   CONFIG     passed as --config (default: the tools' own lookup:
#              ./config.yaml, then ~/.config/cardbaton/config.yaml)
#   LRS        learning rates (default "0.1 0.03 0.01")
#   SEEDS      seeds (default "0 1 2")
#   TRAIN      the training script, run on the node (default train.py;
#              examples/checkpoint_job.py takes --lr and --seed too)
#   CWD        the jobs' working directory on the node (default: the node
#              account's home)
#   PRIORITY   the jobs' priority (default 0)
#
# Prints the job IDs on standard output, one per line, in submission order
# (so ids=$(sh sweep.sh) works), and "ID NAME" lines on standard error.  If
# a submission fails it stops, says so, and exits with cardbaton's status;
# the jobs already submitted stay queued (their IDs were printed).
#
# Then:  cardbaton status   (the queue),  cardbaton logs ID -f,
#        cardbaton cancel ID ...  (e.g. the whole sweep: cardbaton cancel $ids)

CARDBATON=${CARDBATON:-cardbaton}
LRS=${LRS:-0.1 0.03 0.01}
SEEDS=${SEEDS:-0 1 2}
TRAIN=${TRAIN:-train.py}
PRIORITY=${PRIORITY:-0}

n=0
for lr in $LRS; do
	for seed in $SEEDS; do
		name="lr=$lr/seed=$seed"
		# ${CONFIG:+...} and ${CWD:+...} add the flag only when set.
		id=$("$CARDBATON" submit ${CONFIG:+--config "$CONFIG"} ${CWD:+--cwd "$CWD"} \
			--gpu-count 1 --priority "$PRIORITY" --name "$name" \
			-- python3 "$TRAIN" --lr "$lr" --seed "$seed" "$@") || {
			rc=$?
			printf 'sweep.sh: submitting %s failed (exit %d) after %d job(s)\n' \
				"$name" "$rc" "$n" >&2
			exit "$rc"
		}
		printf '%s\n' "$id"
		printf '%s %s\n' "$id" "$name" >&2
		n=$((n + 1))
	done
done
printf 'sweep.sh: %d job(s) submitted\n' "$n" >&2

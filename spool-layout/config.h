/*
 * config.h - config.yaml (config.c over yamlx.c, libyaml): the spool, the
 * nodes, and how to reach them.
 */
#ifndef CARDBATON_CONFIG_H
#define CARDBATON_CONFIG_H

#include <stddef.h>

#include "lab.h"
#include "util.h"

#define DEFAULT_IDLE_MIB 64
#define MAX_JOBS_PER_GPU 64
#define MAX_SLURM_JOBS 1000000 /* slurm.max_jobs at most */
#define DEFAULT_RESERVE_AFTER 300
#define DEFAULT_GPU_REFRESH 30          /* gpu_refresh_seconds */
#define DEFAULT_CK_TRANSFER_GIB 64      /* checkpoint_transfer_max_gib */
#define CK_TRANSFER_GIB_MAX (1LL << 20) /* ... at most 1 PiB */
#define GPU_REFRESH_MAX 86400           /* ... at most (a day) */
#define DEFAULT_MIN_RUNTIME 300         /* preemption: min_runtime_seconds */
#ifndef CONFIG_SYSTEM
#define CONFIG_SYSTEM "/etc/cardbaton/config.yaml"
#endif
#define DEFAULT_REMOTE_STATE_DIR "~/.local/state/sshgpu-queue"
#define MAX_HOOK_ARGS 4096      /* on_finish: at most this many strings */

struct node_conf {
	char *name;
	char *ssh;              /* alias or user@host; NULL when local */
	int local;
	int *gpus;              /* eligible indices, or NULL = all */
	size_t ngpus;
	int has_gpus;
	long long idle_mib;
	long long max_jobs_per_gpu;     /* sharing jobs on one card at most; default 1 */
	char *public_key;       /* as written (may start with ~) */
	/* lease_dir: the node's per-card leases in this absolute path,
	 * shared by every account and controller naming it (LAYOUT.md
	 * section 8), instead of remote_state_dir/leases; NULL: there */
	char *lease_dir;
	/* shared_fs: {NAME: PATH, ...}: the filesystem NAME is mounted at
	 * PATH here (absolute, no "." or ".." parts, no trailing "/"): a
	 * checkpoint under it may resume on any node mounting NAME (SPEC §9) */
	struct shared_fs {
		char *name, *path;
	} *shared_fs;
	size_t nshared_fs;
	/* run_as: owner (SPEC §12; needs lab:, and lease_dir unless a
	 * Slurm node): each job runs as its owner's account there, reached
	 * with the lab's key through the gate; 0: as the daemon's account */
	int run_as_owner;
	/* Not the config's: a copy of a run_as: owner node for one account
	 * reaches it as AS_USER (ssh -l), with the private key AS_KEY only
	 * (-i, IdentitiesOnly; the daemon's, spoold/accts.c) or, NULL, the
	 * operator's own keys (`logs`); AS_USER NULL: as the operator's ssh
	 * does */
	const char *as_user, *as_key;
	char **on_finish;       /* its own on_finish argv, or NULL: the top level's */
	size_t non_finish;
	/* slurm: {partition, sbatch_args, max_jobs}: the node is a Slurm
	 * partition, reached through Slurm's commands on the login node
	 * `ssh` names, or here (then `local` is set) */
	char *slurm_partition;  /* NULL: not a Slurm node */
	char **sbatch_args;
	size_t nsbatch_args;
	long long max_jobs;     /* our jobs in Slurm at once at most; 0: no limit */
};

/*
 * A checkpoint at PATH on node FROM, as node TO sees it: FROM's
 * shared_fs mount holding PATH (the longest whose PATH is a prefix of it
 * at a '/'), and TO's mount of the same NAME, PATH's rest after it.
 * malloc'd into *OUT (FROM == TO: PATH itself), *FS its NAME (NULL when
 * FROM == TO); 0, 1 when TO cannot see it (PATH under no mount of
 * FROM's, not an absolute path of plain parts, or TO does not mount that
 * NAME), -1 out of memory.
 */
int shared_fs_path(const struct node_conf *from, const struct node_conf *to, const char *path,
		   char **out, const char **fs);
/* The shared_fs NAME of FROM's that holds PATH (as above), or NULL. */
const char *shared_fs_of(const struct node_conf *from, const char *path);
/* Does NC mount the filesystem NAME? */
int shared_fs_mounts(const struct node_conf *nc, const char *name);

struct config {
	char *path;             /* file it came from; NULL = embedded default */
	char *spool;            /* absolute path */
	char *remote_state_dir; /* as written; "~" expands on the node */
	char **ssh_command;     /* argv prefix; default {"ssh"} */
	size_t nssh_command;
	long long reserve_after_seconds;
	/* gpu_refresh_seconds: the daemon asks each node for its cards at
	 * least this often, jobs waiting or not (0: only while they wait) */
	long long gpu_refresh_seconds;
	/* checkpoint_transfer_max_gib: the largest checkpoint copied to
	 * another node (checkpoint_transfer, SPEC §9); 0: none is */
	long long checkpoint_transfer_max_gib;
	/* preemption: {enabled, min_runtime_seconds} (SPEC §7): off by default */
	int preempt;
	long long preempt_min_runtime;  /* default DEFAULT_MIN_RUNTIME */
	char **on_finish;       /* the hook run for every job that ends, or NULL */
	size_t non_finish;
	struct node_conf *nodes;
	size_t nnodes;
	/* lab: one spool for a group's members (lab.h); NULL: none */
	struct lab_conf *lab;
};

/*
 * Load the config: PATH when given; else ./config.yaml when present;
 * else $CARDBATON_CONFIG when set (it must exist); else
 * $XDG_CONFIG_HOME/cardbaton/config.yaml (XDG_CONFIG_HOME defaulting
 * to ~/.config) when present; else CONFIG_SYSTEM (the machine's
 * queue, /etc/cardbaton/config.yaml) when present; else the embedded default
 * (one node "local" with local: true, spool
 * $XDG_STATE_HOME/cardbaton/spool, XDG_STATE_HOME defaulting to
 * ~/.local/state).  `spool:` is relative to the config file's
 * directory; default "./spool".  Errors: EX_CONFIG_ with
 * "FILE:LINE: KEY: problem", or "PATH: strerror" when a file found
 * cannot be read (also EX_CONFIG_: never a fall-through to the next).
 */
int config_load(const char *path, struct config *c, struct cb_err *err);
/* Parse config text; DIR is the directory `spool:` is relative to. */
int config_parse(const char *buf, size_t len, const char *fname,
		 const char *dir, struct config *c, struct cb_err *err);
const struct node_conf *config_node(const struct config *c, const char *name);
void config_free(struct config *c);

#endif

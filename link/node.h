/*
 * node.h - link/: the controller's link to its nodes.  Running
 * cardbaton-worker on a node, locally or through ssh (its argv, the
 * shared ssh connection, a deadline on every call), shipping the worker
 * there, putting a key in its authorized_keys, and reading what the
 * worker says of the node's cards.  Everything above it -- the daemon
 * and the tools -- speaks the worker protocol of LAYOUT.md §10 through
 * these calls, so local and remote nodes share every line of code.
 *
 * Library code: it prints nothing and never exits (progress goes to
 * the program's callback, node_set_progress); errors come back in a
 * struct cb_err.  It stands on spool-layout/ (the config, the error
 * convention) and base/.
 */
#ifndef CARDBATON_NODE_H
#define CARDBATON_NODE_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "util.h"

/* Deadlines for remote calls (ms).  An open ssh master does not obey
 * ConnectTimeout, so every call carries its own. */
#define NODE_CALL_MS 30000
#define NODE_QUERY_MS 15000

struct node_reply {
	int status;             /* the worker's exit status; -1 when it could not
				 * be run, timed out or died of a signal */
	char *out;              /* its standard output, NUL-terminated */
	size_t outlen;
	char *err;              /* its standard error, or what went wrong
				 * reaching it (NUL-terminated, may be "") */
};

/*
 * Path of the worker for local nodes: $CARDBATON_WORKER, else
 * cardbaton-worker beside the running program, else PATH.  malloc'd.
 */
char *worker_path(void);

/*
 * The argv that runs "cardbaton-worker -d STATE ARGS..." on node NC:
 * the local worker directly, or ssh_command + options + the host + one
 * shell-quoted remote command.  NULL-terminated, malloc'd (free with
 * argv_free).
 */
char **node_argv(const struct config *c, const struct node_conf *nc,
		 const char *const *args);
void argv_free(char **v);

/* Run ARGS on the node, write INPUT (may be NULL) to its stdin, collect
 * stdout and stderr, all within TIMEOUT_MS (then it is killed).  0 with
 * R filled (look at r->status), or -1 with errno when it could not be
 * started.  On an SSH node that lacks this worker version (the remote
 * shell answers 127) the worker is installed and the call repeated. */
int node_run(const struct config *c, const struct node_conf *nc,
	     const char *const *args, const char *input, size_t inlen,
	     int timeout_ms, struct node_reply *r);
void node_reply_free(struct node_reply *r);

/*
 * Make sure REMOTE_STATE_DIR/bin/cardbaton-worker-WORKER_ID exists on
 * the SSH node NC (no-op for a local node): our dynamically linked
 * build when the node's `uname -m` is ours and its glibc at least ours,
 * else the sources compiled there with cc, else (our architecture) the
 * static build, nvidia-smi only (ship.c).  Installed atomically (temp
 * file + rename); progress
 * through the program's node_set_progress callback.  As one account with
 * a lab's key (NC->as_user, run_as: owner): through the gate's `install
 * ID`, nothing compiled.  0, or -1 with EX_UNAVAILABLE_, or EX_NOPERM_:
 * that account refused the key (ERR holds ssh's or the gate's words).
 */
int node_ensure_worker(const struct config *c, const struct node_conf *nc,
		       struct cb_err *err);

/*
 * Progress of a step that takes a while (shipping the worker: one line
 * before, "NODE: installing cardbaton-worker ID (ARCH, static build)...",
 * and one after, "NODE: cardbaton-worker installed"): each line, with no
 * program name and no newline, goes to FN(ARG), which the program sets
 * once (the tools print "cardbaton: LINE" on a terminal).  The library
 * prints nothing; without a callback the lines are dropped.
 */
typedef void node_progress_fn(void *arg, const char *line);
void node_set_progress(node_progress_fn *fn, void *arg);

/*
 * Make sure the public key KEY (one "TYPE BLOB [COMMENT]" line) is in the
 * node account's ~/.ssh/authorized_keys: existing entries are kept, a
 * key already there is not added twice, the file is replaced atomically
 * with mode 600.  INTERACTIVE lets ssh prompt (password, host key).
 * 0 added, 1 already there, -1 with EX_UNAVAILABLE_.
 */
int node_ensure_key(const struct config *c, const struct node_conf *nc, const char *key,
		    int interactive, struct cb_err *err);
/*
 * A lab's key KEY (SPOOL/controller.pub) in NC's account, through that
 * account's own ssh (`cardbaton bootstrap --lab`, SPEC §12): the worker
 * there (node_ensure_worker, first) copied to STATE/bin/cardbaton-gate,
 * and KEY's line in ~/.ssh/authorized_keys replaced by one with
 * `restrict,command="exec 'STATE/bin/cardbaton-gate' gate 'STATE'"`
 * (STATE absolute there); with REMOVE, every line of KEY taken out.
 * Under the lock and atomic as node_ensure_key.  0 changed, 1 nothing
 * to change, -1 with EX_UNAVAILABLE_.
 */
int node_lab_key(const struct config *c, const struct node_conf *nc, const char *key, int remove,
		 int interactive, struct cb_err *err);
/*
 * A lab's own key pair (SPEC §12): the private key
 * $XDG_STATE_HOME/cardbaton/lab-SPOOLID (~/.local/state by default;
 * 0600, in the daemon account's state, never in the spool), made with
 * ssh-keygen (ed25519, no passphrase) when missing, and its public half
 * SPOOL/controller.pub ("TYPE BLOB cardbaton-lab:SPOOLID", the spool's
 * file mode), written whenever it differs.  labkey_path: the private
 * key's path (malloc'd).  labkey_ensure: 0, or -1 with ERR (EX_CONFIG_:
 * a key file not private; EX_UNAVAILABLE_: no ssh-keygen).
 */
struct spool;
char *labkey_path(const char *spool_id);
int labkey_ensure(struct spool *sp, struct cb_err *err);
/* The first line of the public key file PATH ("~" expands), checked to
 * be an OpenSSH public key.  malloc'd, or NULL with EX_NOINPUT_ /
 * EX_DATAERR_. */
char *pubkey_read(const char *path, struct cb_err *err);

/* Start ARGS on the node for a long conversation (watch, log -f):
 * *in (its stdin, or -1 when IN is NULL) and *out are pipe ends, close-on-exec. */
pid_t node_spawn(const struct config *c, const struct node_conf *nc,
		 const char *const *args, int *in, int *out);

struct gpu_info {
	int index;
	char *uuid, *name;
	long long mem_used, mem_total, util, procs;    /* -1: not reported */
	char *lease;            /* holder's attempt ID, or NULL when free or shared */
	char **shares;          /* held shared (sharing jobs): their attempt IDs */
	size_t nshares;
	/* a node with a lease_dir: each holder's account, in the order of
	 * lease, then shares ("" when the worker could not say) */
	char **accounts;
	size_t naccounts;
	/* a card no one leases: the accounts of its compute processes
	 * (each once; those the node could name) */
	char **proc_accounts;
	size_t nproc_accounts;
};

/* Parse the records of `cardbaton-worker gpus`.  0, or -1 with errno
 * EINVAL on a malformed reply or one holding an `error` record. */
int gpus_parse(const char *out, size_t len, struct gpu_info **g, size_t *n);
void gpus_free(struct gpu_info *g, size_t n);
/* Idle per SPEC §7: memory used <= idle_mib, no compute process, no lease
 * (nor a sharer). */
int gpu_idle(const struct gpu_info *g, long long idle_mib);
/* Eligible per the node's `gpus:` list. */
int gpu_eligible(const struct node_conf *nc, int index);

/* Ask node NC for its GPUs (the worker's gpus command).  0 with the
 * list, or -1 with ERR (EX_UNAVAILABLE_: "NODE: why"). */
int node_gpus(const struct config *c, const struct node_conf *nc,
	      struct gpu_info **g, size_t *n, struct cb_err *err);

#endif

/*
 * keys.c - a public key into a node account's authorized_keys
 * (node_ensure_key; `cardbaton bootstrap`, and the daemon's
 * --public-key), and reading that key from its file (pubkey_read).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crash.h"
#include "link.h"
#include "spooldir.h"
#include "worker-id.h"

/*
 * The remote half of node_ensure_key: the key arrives on stdin; every
 * existing line is kept byte for byte (a missing final newline is
 * added), a key already there (the same type and blob as two fields of
 * a line that is not a comment, whatever its options or comment) is
 * not added again, and the new file -- written in full to a temporary
 * file beside it, synced -- replaces the old by rename: a crash at any
 * point leaves the old file or the new one.  A failed write removes
 * its temporary file.  The read, check and rename are done under a
 * lock, so that two runs at once each add their key: flock(1) on
 * ~/.ssh/.authorized_keys.cardbaton.lock (kept; released by the kernel
 * however the run ends) where the node has flock, else the directory
 * .authorized_keys.cardbaton.lock.d made by mkdir and removed at exit
 * (left by a kill -9: the next runs say so).  Either wait is bounded,
 * at 20 s, within the 30 s deadline of a call.
 */
#define AK_LOCK_SH \
	"set -ef; umask 077; IFS= read -r key; set -- $key; " \
	"d=\"$HOME/.ssh\"; f=\"$d/authorized_keys\"; l=\"$d/.authorized_keys.cardbaton.lock\"; t=; m=; " \
	"mkdir -p \"$d\"; trap '[ -z \"$t\" ] || rm -f \"$t\"; [ -z \"$m\" ] || rmdir \"$m\"' EXIT; " \
	"trap 'exit 1' HUP INT TERM; " \
	"if command -v flock >/dev/null 2>&1; then exec 9>>\"$l\"; " \
	"flock -w 20 9 || { echo \"$l: locked by another run for 20 s\" >&2; exit 1; }; " \
	"else n=0; until mkdir \"$l.d\" 2>/dev/null; do " \
	"[ $n -lt 200 ] || { echo \"$l.d: there for 20 s: remove it if no bootstrap is running\" >&2; exit 1; }; " \
	"if sleep 0.1 2>/dev/null; then n=$((n + 1)); else sleep 1; n=$((n + 10)); fi; done; m=\"$l.d\"; fi; "

/* The end of both scripts: the new file $t, whole, synced, renamed. */
#define AK_REPLACE_SH "chmod 600 \"$t\"; sync \"$t\" 2>/dev/null || sync; mv -f \"$t\" \"$f\"; "

static const char ensure_key_sh[] =
	AK_LOCK_SH
	"if [ -f \"$f\" ] && awk -v t=\"$1\" -v b=\"$2\" "
	"'{ sub(/\\r$/, \"\") } $1 ~ /^#/ { next } "
	"{ for (i = 1; i < NF; i++) if ($i == t && $(i + 1) == b) { f = 1; exit } } "
	"END { exit !f }' \"$f\"; then echo present; exit 0; fi; "
	"t=\"$d/.authorized_keys.cardbaton.$$\"; "
	"{ if [ -f \"$f\" ]; then cat \"$f\"; "
	"if [ -s \"$f\" ] && [ -n \"$(tail -c 1 \"$f\")\" ]; then echo; fi; fi; "
	"printf '%s\\n' \"$key\"; } > \"$t\"; " AK_REPLACE_SH "echo added";

/* Run the script CMD (consumed) on NC's account with KEY on its stdin:
 * 0 when it says CHANGED, 1 when it says SAME, -1 with ERR (its first
 * line of stderr) otherwise. */
static int run_keys_sh(const struct config *c, const struct node_conf *nc, char *cmd, const char *key,
		       int interactive, const char *changed, const char *same, struct cb_err *err)
{
	struct node_reply r;
	char **argv, *input;
	int ret;

	if (!cmd || !(input = xasprintf("%s\n", key))) {
		free(cmd);
		return cb_err_sys(err, EX_OSERR_, "%s", nc->name);
	}
	if (!(argv = link_ssh_argv(c, nc, cmd, !interactive)) ||
	    link_run(argv, input, strlen(input), interactive ? 10 * NODE_CALL_MS : NODE_CALL_MS,
		     &r) < 0) {
		free(input);
		return cb_err_sys(err, EX_UNAVAILABLE_, "%s", nc->name);
	}
	free(input);
	if (r.status == 0 && !strncmp(r.out, same, strlen(same)) && !strcmp(r.out + strlen(same), "\n"))
		ret = 1;
	else if (r.status == 0 && !strncmp(r.out, changed, strlen(changed)) &&
		 !strcmp(r.out + strlen(changed), "\n"))
		ret = 0;
	else {
		size_t n = strcspn(r.err, "\n");

		ret = cb_err_set(err, EX_UNAVAILABLE_, "%s: %.*s", nc->name, (int)n,
				 n ? r.err : "could not update ~/.ssh/authorized_keys");
	}
	node_reply_free(&r);
	return ret;
}

int node_ensure_key(const struct config *c, const struct node_conf *nc, const char *key,
		    int interactive, struct cb_err *err)
{
	return run_keys_sh(c, nc, strdup(ensure_key_sh), key, interactive, "added", "present", err);
}

/*
 * The remote half of node_lab_key, after "s=STATE; w=WORKER_ID; r=0|1;"
 * (r=1: --remove) and the lock: the state directory made absolute from
 * the account's home and without trailing slashes, as the gate will
 * compare it; the worker copied to bin/cardbaton-gate (a temporary file
 * and a rename); every line holding the key's type and blob dropped, and
 * unless removing, the key added with `restrict` and the gate as its
 * forced command.  Nothing written when nothing changes (cmp).
 */
static const char lab_key_sh[] =
	AK_LOCK_SH
	"case $s in /*) a=$s ;; *) a=\"$HOME/$s\" ;; esac; "
	"while :; do case $a in ?*/) a=${a%/} ;; *) break ;; esac; done; "
	"case $a in *\\'*|*\\\"*|*\\\\*) "
	"echo \"$a: a quote or backslash in the state directory's path cannot go in a forced command\" >&2; "
	"exit 1 ;; esac; "
	"g=\"$a/bin/cardbaton-gate\"; "
	"if [ $r = 0 ]; then cp \"$a/bin/cardbaton-worker-$w\" \"$g.tmp.$$\" && chmod 755 \"$g.tmp.$$\" && "
	"mv -f \"$g.tmp.$$\" \"$g\" || { rm -f \"$g.tmp.$$\"; exit 1; }; fi; "
	"t=\"$d/.authorized_keys.cardbaton.$$\"; "
	"{ if [ -f \"$f\" ]; then awk -v t=\"$1\" -v b=\"$2\" "
	"'{ l = $0; sub(/\\r$/, \"\", l) } l !~ /^#/ { n = split(l, w, \" \"); "
	"for (i = 1; i < n; i++) if (w[i] == t && w[i + 1] == b) next } { print }' \"$f\"; fi; "
	"if [ $r = 0 ]; then printf '%s\\n' \"restrict,command=\\\"exec '$g' gate '$a'\\\" $key\"; fi; } > \"$t\"; "
	"if [ -f \"$f\" ] && cmp -s \"$t\" \"$f\"; then "
	"if [ $r = 0 ]; then echo present; else echo absent; fi; exit 0; fi; "
	"if [ $r = 1 ] && [ ! -f \"$f\" ]; then echo absent; exit 0; fi; "
	AK_REPLACE_SH "if [ $r = 0 ]; then echo added; else echo removed; fi";

int node_lab_key(const struct config *c, const struct node_conf *nc, const char *key, int remove,
		 int interactive, struct cb_err *err)
{
	struct sbuf cmd = { 0 };

	if (sbuf_add(&cmd, "s=", 2) < 0 || link_remote_path(&cmd, c->remote_state_dir, "") < 0 ||
	    sbuf_addf(&cmd, "; w=%s; r=%d; %s", WORKER_ID, remove ? 1 : 0, lab_key_sh) < 0) {
		sbuf_free(&cmd);
		return cb_err_sys(err, EX_OSERR_, "%s", nc->name);
	}
	return run_keys_sh(c, nc, cmd.s, key, interactive, remove ? "removed" : "added",
			   remove ? "absent" : "present", err);
}

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

char *pubkey_read(const char *path, struct cb_err *err)
{
	char *p = expand_home(path), *buf = NULL, *dir, *slash, *key;
	size_t len;
	int fd = -1;

	if (!p || !(dir = strdup(p))) {
		free(p);
		cb_err_sys(err, EX_OSERR_, "%s", path);
		return NULL;
	}
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	fd = open(slash ? (*dir ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || read_capped(fd, slash ? slash + 1 : p, 16384, &buf, &len) < 0) {
		cb_err_sys(err, EX_NOINPUT_, "%s", path);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	free(dir);
	free(p);
	if (!buf)
		return NULL;
	buf[strcspn(buf, "\r\n")] = '\0';
	key = buf;
	/* "TYPE BLOB [COMMENT]": a public key, not a private one or options. */
	{
		size_t t = strcspn(key, " "), b;

		b = key[t] ? strspn(key + t + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") : 0;
		if (!t || !key[t] || b < 16 || (key[t + 1 + b] && key[t + 1 + b] != ' ') ||
		    !(strncmp(key, "ssh-", 4) == 0 || strncmp(key, "ecdsa-", 6) == 0 ||
		      strncmp(key, "sk-", 3) == 0) || has_control(key)) {
			cb_err_set(err, EX_DATAERR_, "%s: not an OpenSSH public key", path);
			free(buf);
			return NULL;
		}
	}
	return key;
}

/* ---- the lab's own key (the daemon) ----------------------------------- */

char *labkey_path(const char *spool_id)
{
	const char *x = getenv("XDG_STATE_HOME");
	char *base = x && x[0] == '/' ? strdup(x) : expand_home("~/.local/state"), *p;

	if (!base)
		return NULL;
	p = xasprintf("%s/cardbaton/lab-%s", base, spool_id);
	free(base);
	return p;
}

/* Run ssh-keygen with ARGS (NULL-terminated, after the program's name):
 * 0 with R (node_reply_free it), -1 with ERR. */
static int keygen(const char *const *args, struct node_reply *r, struct cb_err *err)
{
	size_t n = 0, k = 0;
	char **v;

	while (args[n])
		n++;
	if (!(v = calloc(n + 2, sizeof *v)))
		return cb_err_sys(err, EX_OSERR_, "ssh-keygen");
	for (v[k++] = strdup("ssh-keygen"); k <= n && v[k - 1]; k++)
		v[k] = strdup(args[k - 1]);
	if (!v[k - 1]) {
		argv_free(v);
		return cb_err_sys(err, EX_OSERR_, "ssh-keygen");
	}
	if (link_run(v, "", 0, NODE_CALL_MS, r) < 0)
		return cb_err_sys(err, EX_UNAVAILABLE_, "ssh-keygen");
	if (r->status != 0) {
		size_t m = strcspn(r->err, "\n");

		cb_err_set(err, r->status == 127 ? EX_UNAVAILABLE_ : EX_OSERR_, "ssh-keygen: %.*s", (int)m,
			   m ? r->err : "failed");
		node_reply_free(r);
		return -1;
	}
	return 0;
}

int labkey_ensure(struct spool *sp, struct cb_err *err)
{
	char *key = labkey_path(sp->id), *dir = NULL, *tmp = NULL, *pub = NULL, *old = NULL;
	char *comment = xasprintf("cardbaton-lab:%s", sp->id);
	struct node_reply r = { 0 };
	struct stat st;
	size_t len = 0, t, b;
	int ret = -1;

	if (!key || !comment || !(dir = strdup(key))) {
		cb_err_sys(err, EX_OSERR_, "lab key");
		goto out;
	}
	*strrchr(dir, '/') = '\0';
	if (mkdir_p(dir) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", dir);
		goto out;
	}
	if (lstat(key, &st) < 0 && errno == ENOENT) {
		/* Made aside and renamed: a crash leaves no key, or a whole
		 * one (its public half is made again from it below). */
		const char *args[] = { "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", NULL, NULL };

		if (!(tmp = xasprintf("%s/.lab-%s.%ld", dir, sp->id, (long)getpid())) ||
		    !(pub = xasprintf("%s.pub", tmp))) {
			cb_err_sys(err, EX_OSERR_, "lab key");
			goto out;
		}
		unlink(tmp);
		unlink(pub);
		args[8] = tmp;
		if (keygen(args, &r, err) < 0)
			goto out;
		node_reply_free(&r);
		unlink(pub);
		if (rename(tmp, key) < 0) {
			cb_err_sys(err, EX_OSERR_, "%s", key);
			unlink(tmp);
			goto out;
		}
		CRASH_POINT("lab key: made", NULL);
		free(pub);
		pub = NULL;
	}
	if (lstat(key, &st) < 0) {
		cb_err_sys(err, EX_OSERR_, "%s", key);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		cb_err_set(err, EX_CONFIG_, "%s: the lab's private key must be a regular file of this "
			   "account's, mode 0600", key);
		goto out;
	}
	{
		const char *const args[] = { "-y", "-f", key, NULL };

		if (keygen(args, &r, err) < 0)
			goto out;
	}
	/* "TYPE BLOB", whatever comment ssh-keygen -y prints, then ours. */
	t = strcspn(r.out, " ");
	b = r.out[t] ? strcspn(r.out + t + 1, " \n") : 0;
	if (!t || !b || !(pub = xasprintf("%.*s %s\n", (int)(t + 1 + b), r.out, comment))) {
		cb_err_set(err, EX_OSERR_, "%s: ssh-keygen -y printed no public key", key);
		goto out;
	}
	if (read_capped(sp->fd, LAB_PUB, 16384, &old, &len) == 0 && !strcmp(old, pub)) {
		ret = 0;
		goto out;
	}
	if (atomic_write(sp->dir[SD_TMP], sp->fd, LAB_PUB, pub, strlen(pub), sp->fmode) < 0) {
		cb_err_sys(err, spool_errno_ex(errno), "%s/%s", sp->path, LAB_PUB);
		goto out;
	}
	ret = 0;
out:
	node_reply_free(&r);
	free(old);
	free(pub);
	free(tmp);
	free(dir);
	free(comment);
	free(key);
	return ret;
}

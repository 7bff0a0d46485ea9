/*
 * keys.c - a public key into a node account's authorized_keys
 * (node_ensure_key; `cardbaton bootstrap`, and the daemon's
 * --public-key), and reading that key from its file (pubkey_read).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link.h"

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
static const char ensure_key_sh[] =
	"set -ef; umask 077; IFS= read -r key; set -- $key; "
	"d=\"$HOME/.ssh\"; f=\"$d/authorized_keys\"; l=\"$d/.authorized_keys.cardbaton.lock\"; t=; m=; "
	"mkdir -p \"$d\"; trap '[ -z \"$t\" ] || rm -f \"$t\"; [ -z \"$m\" ] || rmdir \"$m\"' EXIT; "
	"trap 'exit 1' HUP INT TERM; "
	"if command -v flock >/dev/null 2>&1; then exec 9>>\"$l\"; "
	"flock -w 20 9 || { echo \"$l: locked by another run for 20 s\" >&2; exit 1; }; "
	"else n=0; until mkdir \"$l.d\" 2>/dev/null; do "
	"[ $n -lt 200 ] || { echo \"$l.d: there for 20 s: remove it if no bootstrap is running\" >&2; exit 1; }; "
	"if sleep 0.1 2>/dev/null; then n=$((n + 1)); else sleep 1; n=$((n + 10)); fi; done; m=\"$l.d\"; fi; "
	"if [ -f \"$f\" ] && awk -v t=\"$1\" -v b=\"$2\" "
	"'{ sub(/\\r$/, \"\") } $1 ~ /^#/ { next } "
	"{ for (i = 1; i < NF; i++) if ($i == t && $(i + 1) == b) { f = 1; exit } } "
	"END { exit !f }' \"$f\"; then echo present; exit 0; fi; "
	"t=\"$d/.authorized_keys.cardbaton.$$\"; "
	"{ if [ -f \"$f\" ]; then cat \"$f\"; "
	"if [ -s \"$f\" ] && [ -n \"$(tail -c 1 \"$f\")\" ]; then echo; fi; fi; "
	"printf '%s\\n' \"$key\"; } > \"$t\"; chmod 600 \"$t\"; "
	"sync \"$t\" 2>/dev/null || sync; mv -f \"$t\" \"$f\"; echo added";

int node_ensure_key(const struct config *c, const struct node_conf *nc, const char *key,
		    int interactive, struct cb_err *err)
{
	struct node_reply r;
	char **argv, *input, *cmd = strdup(ensure_key_sh);
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
	if (r.status == 0 && !strcmp(r.out, "present\n"))
		ret = 1;
	else if (r.status == 0 && !strcmp(r.out, "added\n"))
		ret = 0;
	else {
		size_t n = strcspn(r.err, "\n");

		ret = cb_err_set(err, EX_UNAVAILABLE_, "%s: %.*s", nc->name, (int)n,
				 n ? r.err : "could not update ~/.ssh/authorized_keys");
	}
	node_reply_free(&r);
	return ret;
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

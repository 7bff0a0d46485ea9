/*
 * failsync.c - an LD_PRELOAD library for the tests: fsync, fdatasync
 * and syncfs fail with EIO while the file named by CB_FAIL_SYNC exists
 * (the disk gone bad under a running daemon: diskfull.bats).  Anything
 * else, and those calls without that file, are libc's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

int fsync(int fd);
int fdatasync(int fd);
int syncfs(int fd);

static int armed(void)
{
	const char *f = getenv("CB_FAIL_SYNC");

	return f && *f && access(f, F_OK) == 0;
}

#define PASS(name)                                                      \
	int name(int fd)                                                \
	{                                                               \
		int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, #name); \
									\
		if (armed() || !real) {                                 \
			errno = EIO;                                    \
			return -1;                                      \
		}                                                       \
		return real(fd);                                        \
	}

PASS(fsync)
PASS(fdatasync)
PASS(syncfs)

# CardBaton - one Makefile for everything.
#
#   make            build into build/ (B=dir to choose another)
#   make test       unit + end-to-end suite, then the same on an
#                   ASan+UBSan build in build-san/, which also has the
#                   crash points (crash.h) that tests/e2e/crash.bats
#                   walks  (alias: check)
#   make demo       a short run on the embedded default config
#   make bench      benchmarks against tsp and nq
#   make fuzz       the libFuzzer targets of tests/fuzz/ (clang, ASan+UBSan),
#                   FUZZ_SECONDS=120 each, on a copy of their seed corpora
#   make fuzz-smoke the same for 5 s each (the last step of make test)
#   make soak       a seeded fault run on SSH test hosts (root), bounded:
#                   SOAK_SECONDS=600 SOAK_JOBS=500 SOAK_SEED=(random, printed)
#   make install    PREFIX=/usr/local DESTDIR=
#   make clean

PREFIX  ?= /usr/local
BINDIR   = $(PREFIX)/bin
LIBEXEC  = $(PREFIX)/libexec/cardbaton
MANDIR   = $(PREFIX)/share/man
B       ?= build

PKGS     = yaml-0.1 libcjson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS)) -lm

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CPPFLAGS += -D_GNU_SOURCE -Ibase -Ispool-layout -Ilink -I$(B)
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) $(SANFLAGS)

# base/: libc only, shared by the worker, the library, the tools and
# the daemon.  The library: base/, spool-layout/ (the disk) and link/
# (running the worker on a node).
BASE_SRC = $(wildcard base/*.c)
LIB_SRC  = $(BASE_SRC) $(wildcard spool-layout/*.c) $(wildcard link/*.c)
LIB_OBJ  = $(LIB_SRC:%.c=$(B)/%.o)
LIB      = $(B)/libcardbaton.a

TOOLS    = submit status logs promote pause resume cancel hold release wait drain undrain gpus bootstrap \
           top metrics report mcp users
TOOL_BIN = $(TOOLS:%=$(B)/cardbaton-%)
BINS     = $(B)/cardbaton $(B)/sshgpu $(TOOL_BIN) $(B)/cardbaton-spoold \
           $(B)/cardbaton-run $(B)/cardbaton-worker $(B)/cardbaton-worker-static \
           $(B)/cardbaton-worker-dynamic $(B)/cardbaton-worker.shar

SPOOLD_SRC = $(wildcard spoold/*.c)
WORKER_SRC = $(wildcard worker/*.c) $(BASE_SRC) spool-layout/wire.c spool-layout/crash.c
WORKER_ALL = $(WORKER_SRC) $(wildcard worker/*.h) base/base.h spool-layout/wire.h spool-layout/crash.h
UNIT_SRC   = $(wildcard tests/unit/*.c)
UNIT_BIN   = $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
BIN_COMMON = $(filter-out $(TOOLS:%=bin/%.c) bin/cardbaton.c,$(wildcard bin/*.c))

# The fake NVML libraries the tests load (rules below).
FAKE_NVML  = $(B)/tests/fake-nvml/libnvidia-ml.so.1 $(B)/tests/fake-nvml-old/libnvidia-ml.so.1 \
             $(B)/tests/failsync/failsync.so

all: $(BINS) $(UNIT_BIN) $(FAKE_NVML)

$(B)/%.o: %.c $(wildcard base/*.h spool-layout/*.h link/*.h spoold/*.h bin/*.h worker/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# The worker's identity: its version and a hash of its sources.  The
# controller ships it to nodes as bin/cardbaton-worker-VERSION-HASH.
$(B)/worker-id.h: $(WORKER_ALL) Makefile
	@mkdir -p $(B)
	printf '#define WORKER_ID "%s-%s"\n' "$$(sed -n 's/^#define WORKER_VERSION "\(.*\)"/\1/p' worker/worker.h)" \
		"$$(cat $(WORKER_ALL) | sha256sum | cut -c1-16)" > $@.tmp
	mv -f $@.tmp $@

$(B)/link/node.o $(B)/link/ship.o $(B)/link/keys.o: $(B)/worker-id.h

$(LIB): $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/cardbaton-%: $(B)/bin/%.o $(BIN_COMMON:%.c=$(B)/%.o) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/cardbaton: $(B)/bin/cardbaton.o $(BASE_SRC:%.c=$(B)/%.o)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^

$(B)/sshgpu: $(B)/cardbaton
	ln -sf cardbaton $@

$(B)/cardbaton-spoold: $(SPOOLD_SRC:%.c=$(B)/%.o) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/cardbaton-run: $(B)/cardbaton-spoold
	ln -sf cardbaton-spoold $@

# The worker needs libc only: nothing from PKG_LIBS may creep in.
$(B)/cardbaton-worker: $(WORKER_SRC:%.c=$(B)/%.o)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^

# What is shipped to SSH nodes: a static build (no sanitizers: it runs
# there on its own), and the sources as a shell script for nodes of
# another architecture.  A crash-point build's have the points too
# (SHIP_CRASH: the crash walk's fake SSH node, tests/crash-walk).
SHIP_CRASH = $(filter -DCB_CRASH_POINTS,$(SANFLAGS))
# Without NVML (worker/nvml.c): dlopen from a static glibc binary would
# load a second libc.  It asks nvidia-smi.
$(B)/cardbaton-worker-static: $(WORKER_ALL)
	$(CC) -std=c11 -D_GNU_SOURCE -DCARDBATON_NO_NVML $(SHIP_CRASH) -Ibase -Ispool-layout $(WARN) -O2 -static -o $@ $(WORKER_SRC)

# ... and, for nodes of our architecture whose glibc is at least this
# one's, the same dynamically linked (NVML by dlopen), never with the
# sanitizers (link/ship.c: the first choice).
$(B)/cardbaton-worker-dynamic: $(WORKER_ALL)
	$(CC) -std=c11 -D_GNU_SOURCE $(SHIP_CRASH) -Ibase -Ispool-layout $(WARN) -O2 -o $@ $(WORKER_SRC) -ldl

$(B)/cardbaton-worker.shar: $(WORKER_ALL) worker/mkshar.sh
	worker/mkshar.sh $@ $(WORKER_ALL)

# The fake NVML library the tests load instead of the driver's
# (tests/fake-nvml/fake-nvml.c): a current driver's, and with
# -DFAKE_NVML_OLD a pre-R510 one's.  No sanitizers: it is loaded into
# whichever worker is under test.
$(B)/tests/fake-nvml/libnvidia-ml.so.1: tests/fake-nvml/fake-nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -shared -fPIC -o $@ $<

$(B)/tests/fake-nvml-old/libnvidia-ml.so.1: tests/fake-nvml/fake-nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -DFAKE_NVML_OLD $(WARN) $(CFLAGS) -shared -fPIC -o $@ $<

# Syncs that fail with EIO on demand, LD_PRELOADed (tests/failsync/).
$(B)/tests/failsync/failsync.so: tests/failsync/failsync.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -shared -fPIC -o $@ $< -ldl

# A unit test may #include a worker source (it is libc only).
$(B)/tests/unit/test_ckjson.o: worker/json.c worker/json.h

# A unit test may link an object of its own beside the library: the
# daemon's planner (spoold/plan.c) is a pure function.
$(B)/tests/test_plan: $(B)/spoold/plan.o
$(B)/tests/test_table: $(B)/spoold/table.o
# ... and the card snapshots (spoold/cards.c) over the node calls and helpers.
$(B)/tests/test_cards: $(B)/spoold/cards.o $(B)/spoold/util.o $(B)/spoold/acall.o $(B)/spoold/plan.o \
	$(B)/spoold/accts.o
$(B)/tests/test_depidx: $(B)/spoold/depidx.o
$(B)/tests/test_metrics: $(B)/spoold/metrics.o
# ... and the tools' aligned columns (bin/common.c).
$(B)/tests/test_tablecols: $(B)/bin/common.o
# ... and the worker's objects but its main (worker/slurm.c's sinfo and squeue readers).
$(B)/tests/test_slurm: $(filter-out $(B)/worker/main.o,$(WORKER_SRC:%.c=$(B)/%.o))

$(B)/tests/%: $(B)/tests/unit/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB) $(PKG_LIBS)

# ---- tests ---------------------------------------------------------------

SAN = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# `make test` and `make demo` are the README's two set-up commands: they
# install the Debian packages they need first.
# Every suite runs once under the sanitizers unless it cannot (below),
# and once with the plain build unless it is in SAN_ONLY_E2E.
# The sanitizer pass leaves out the seeded fault run (faults.bats: the
# plain pass has it, and `make soak B=build-san` runs it long), the
# test harnesses' own tests (sshhosts.bats, slurmharness.bats: shell,
# namespaces and Slurm, none of our C) and the real-GPU check's run
# against the fakes (device.bats: a script over tools the other suites
# run under the sanitizers) and the checkpoint transfers between two
# hosts (transfer.bats: the crash walk, under the sanitizers, moves a
# checkpoint in every one of its runs, and ckstream.bats drives the
# worker's side); the crash-point walk (crash.bats, which only a
# crash-point build runs) has a lane of its own.
SAN_ALL_E2E = $(filter-out tests/e2e/faults.bats tests/e2e/sshhosts.bats tests/e2e/slurmharness.bats \
			   tests/e2e/device.bats tests/e2e/crash.bats tests/e2e/transfer.bats \
			   $(SAN_AFTER_WALK_E2E),$(wildcard tests/e2e/*.bats))
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

# The suites mostly wait (for daemons, nodes, Slurm), so several run at
# once, and work that needs only the CPU beside them, balanced by the
# suites' times in CI (bats --timing), in three lanes:
#   crash:  the sanitizer build (niced), then at once the crash-point
#           walk (crash.bats: runs of its own on a local node, two
#           per CPU at a time, at most four -- tests/crash-walk
#           CRASH_WALK_JOBS; six at a time on CI's two cores left timed
#           steps, unstage and the baton giving up, unreached, and two
#           make the walk some 20 minutes there); it starts while the
#           plain pass still runs, in the time the suites spend waiting;
#           once the walk is done, a few suites under the sanitizers
#           (SAN_AFTER_WALK_E2E);
#   1. the plain pass (unit tests, most suites) | a second lane of
#      suites (BESIDE_E2E), then the fuzz smoke (niced);
#   2. once both and the sanitizer build are done, under the
#      sanitizers: the unit tests and the longest suites
#      (SAN_MAIN_E2E) | the other suites | with the plain build, the
#      suites that mostly wait (WAITING_E2E: transfer.bats, slurm.bats,
#      faults.bats), then under the sanitizers SAN_AFTER_WAITING_E2E.
# CI's 20 minutes on two cores (issue 35's stops: 1294 s, over): the
# suites in SAN_ONLY_E2E -- the longest, and those whose plain run told
# nothing the sanitizer run does not -- run only under the sanitizers.
# Both builds are the same sources; the sanitizers' checks are the
# stricter, and the plain build's own behaviour (its install, its demo,
# its timings) is what the plain pass keeps.  (Then, once the walk polled
# without a python, 776 s here; its lane had room, and ssh.bats went
# there.)
# A suite's lane and its time: bats --timing in CI's log.
# Every lane runs to its end, whatever another's result, so that one
# run shows every failure; the exit status is 0 only when all passed.
# No suite shares anything with another (each test has its own
# directory, test hosts, cluster and ports).  Each side's log is shown
# whole after it.  Every timeout in every lane is scaled by
# CB_TEST_TIMEOUT_SCALE, which each tests/run chooses from its build
# and the machine (the CPUs, the load, the sanitizers) unless it is set
# (tests/lib/scale.bash; AGENTS.md "Building and testing").
BESIDE_E2E = tests/e2e/slurmharness.bats tests/e2e/device.bats tests/e2e/lab.bats \
	     tests/e2e/labsched.bats tests/e2e/report.bats tests/e2e/leasedir.bats \
	     tests/e2e/labperm.bats tests/e2e/tools.bats tests/e2e/statusidx.bats
# ... and, with the plain build, beside the sanitizer lanes: suites that
# mostly wait (the checkpoint transfers: ssh, copies paced on purpose;
# a real Slurm cluster; the seeded fault run's faults).
WAITING_E2E = tests/e2e/transfer.bats tests/e2e/slurm.bats tests/e2e/faults.bats
SAN_ONLY_E2E = $(addprefix tests/e2e/,runas.bats sharedfs.bats python.bats ssh.bats daemon.bats \
				      hostile.bats nvml.bats checkpoint.bats staged.bats diskfull.bats \
				      workflow.bats)
SAN_MAIN_E2E = $(addprefix tests/e2e/,hostile.bats checkpoint.bats baton.bats \
				      diskfull.bats examples.bats mcp.bats hooks.bats nvml.bats \
				      drain.bats staged.bats statusidx.bats workflow.bats lab.bats \
				      labsched.bats leasedir.bats)
# ... in the waiting lane, after its plain suites:
SAN_AFTER_WAITING_E2E = tests/e2e/sharedfs.bats
# ... and in the crash lane, once the walk is done:
SAN_AFTER_WALK_E2E = tests/e2e/ssh.bats tests/e2e/daemon.bats tests/e2e/runas.bats tests/e2e/python.bats

test check:
	tests/install-deps
	$(MAKE) all
	@rm -f $(B)/build-san.log; \
	{ nice -n 19 $(MAKE) B=build-san SANFLAGS="$(SAN) -DCB_CRASH_POINTS" CFLAGS="-O1 -g" all \
		> $(B)/build-san.out 2>&1; echo "san build: exit $$?" >> $(B)/build-san.out; \
	  mv $(B)/build-san.out $(B)/build-san.log; \
	  grep -qx 'san build: exit 0' $(B)/build-san.log && \
		$(SAN_ENV) tests/run build-san e2e tests/e2e/crash.bats; \
	  echo "crash walk: exit $$?"; \
	  grep -qx 'san build: exit 0' $(B)/build-san.log && \
		$(SAN_ENV) tests/run build-san e2e $(SAN_AFTER_WALK_E2E); \
	  echo "after the walk: exit $$?"; } > $(B)/crash.log 2>&1 & c=$$!; \
	{ tests/run $(B) e2e $(BESIDE_E2E); echo "beside: exit $$?"; \
	  nice -n 19 $(MAKE) fuzz-smoke; echo "fuzz-smoke: exit $$?"; } > $(B)/beside-plain.log 2>&1 & b=$$!; \
	tests/run $(B) all $(filter-out $(BESIDE_E2E) $(SAN_ONLY_E2E) $(WAITING_E2E),$(wildcard tests/e2e/*.bats)); r1=$$?; \
	wait $$b; cat $(B)/beside-plain.log; \
	while [ ! -e $(B)/build-san.log ]; do sleep 1; done; cat $(B)/build-san.log; \
	{ tests/run $(B) e2e $(WAITING_E2E); echo "waiting: exit $$?"; \
	  grep -qx 'san build: exit 0' $(B)/build-san.log && \
		$(SAN_ENV) tests/run build-san e2e $(SAN_AFTER_WAITING_E2E); \
	  echo "san after waiting: exit $$?"; } > $(B)/waiting.log 2>&1 & w=$$!; \
	r2=1; if grep -qx 'san build: exit 0' $(B)/build-san.log; then \
		{ $(SAN_ENV) tests/run build-san e2e $(filter-out $(SAN_MAIN_E2E) $(SAN_AFTER_WAITING_E2E),$(SAN_ALL_E2E)); \
		  echo "beside: exit $$?"; } > $(B)/beside.log 2>&1 & b=$$!; \
		$(SAN_ENV) tests/run build-san all $(SAN_MAIN_E2E); r2=$$?; \
		wait $$b; cat $(B)/beside.log; \
	fi; \
	wait $$w; cat $(B)/waiting.log; \
	wait $$c; cat $(B)/crash.log; \
	[ $$r1 -eq 0 ] && grep -qx 'beside: exit 0' $(B)/beside-plain.log && \
		grep -qx 'fuzz-smoke: exit 0' $(B)/beside-plain.log && [ $$r2 -eq 0 ] && \
		grep -qx 'waiting: exit 0' $(B)/waiting.log && \
		grep -qx 'san after waiting: exit 0' $(B)/waiting.log && \
		grep -qx 'beside: exit 0' $(B)/beside.log && grep -qx 'crash walk: exit 0' $(B)/crash.log && \
		grep -qx 'after the walk: exit 0' $(B)/crash.log

unit: all
	tests/run $(B) unit

demo:
	tests/install-deps
	$(MAKE) all
	tests/demo.sh $(B)

bench: all
	tests/bench/run $(B)

# The parsers under libFuzzer (tests/fuzz/run builds the targets with
# clang into $(B)/fuzz and prints executions and coverage per target).
FUZZ_SECONDS ?= 120
fuzz:
	tests/fuzz/run $(B)/fuzz $(FUZZ_SECONDS)

fuzz-smoke:
	tests/fuzz/run $(B)/fuzz 5

# Faults (daemon kill -9, ss -K, partitions, nvidia-smi failing or
# hanging, workers killed) at random for SOAK_SECONDS, then the
# invariants; tests/e2e/faults.bats is the short run of `make test`.
SOAK_SECONDS ?= 600
SOAK_JOBS    ?= 500
SOAK_SEED    ?=
soak: all
	tests/soak/soak --build $(B) --seconds $(SOAK_SECONDS) --jobs $(SOAK_JOBS) \
		$(if $(SOAK_SEED),--seed $(SOAK_SEED)) $(if $(SOAK_PREEMPT),--preempt) \
		$(if $(SOAK_TRANSFER),--transfer) $(if $(SOAK_RUN_AS),--run-as)

# ---- install -------------------------------------------------------------

MAN1 = $(wildcard man/*.1)
MAN5 = $(wildcard man/*.5)
MAN8 = $(wildcard man/*.8)
COMPDIR  = $(PREFIX)/share/bash-completion/completions
DOCDIR   = $(PREFIX)/share/doc/cardbaton
EXAMPLES = $(wildcard examples/*)
# The Python helper (python/cardbaton): where this python3 looks for
# packages under PREFIX (Debian's dist-packages, else site-packages).
PYTHONDIR ?= $(shell python3 -c 'import sys; print("$(PREFIX)/lib/python%d.%d/%s-packages" % (sys.version_info[0], sys.version_info[1], "dist" if any(p.endswith("dist-packages") for p in sys.path) else "site"))' 2>/dev/null)
PYFILES  = $(wildcard python/cardbaton/*.py)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXEC) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	install -m 755 $(B)/cardbaton $(TOOL_BIN) $(B)/cardbaton-spoold \
		$(B)/cardbaton-worker $(DESTDIR)$(BINDIR)
	ln -sf cardbaton $(DESTDIR)$(BINDIR)/sshgpu
	ln -sf cardbaton-spoold $(DESTDIR)$(BINDIR)/cardbaton-run
	install -m 644 $(WORKER_ALL) $(B)/cardbaton-worker.shar $(DESTDIR)$(LIBEXEC)
	install -m 755 $(B)/cardbaton-worker-static $(B)/cardbaton-worker-dynamic $(DESTDIR)$(LIBEXEC)
	$(if $(MAN1),install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1)
	$(if $(MAN5),install -m 644 $(MAN5) $(DESTDIR)$(MANDIR)/man5)
	$(if $(MAN8),install -m 644 $(MAN8) $(DESTDIR)$(MANDIR)/man8)
	install -d $(DESTDIR)$(COMPDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 644 completion/cardbaton.bash $(DESTDIR)$(COMPDIR)/cardbaton
	ln -sf cardbaton $(DESTDIR)$(COMPDIR)/sshgpu
	install -m 644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples
	$(if $(PYTHONDIR),install -d $(DESTDIR)$(PYTHONDIR)/cardbaton && \
		install -m 644 $(PYFILES) $(DESTDIR)$(PYTHONDIR)/cardbaton)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/cardbaton $(DESTDIR)$(BINDIR)/sshgpu \
		$(TOOLS:%=$(DESTDIR)$(BINDIR)/cardbaton-%) \
		$(DESTDIR)$(BINDIR)/cardbaton-spoold $(DESTDIR)$(BINDIR)/cardbaton-run \
		$(DESTDIR)$(BINDIR)/cardbaton-worker \
		$(MAN1:man/%=$(DESTDIR)$(MANDIR)/man1/%) $(MAN5:man/%=$(DESTDIR)$(MANDIR)/man5/%) \
		$(MAN8:man/%=$(DESTDIR)$(MANDIR)/man8/%) \
		$(DESTDIR)$(COMPDIR)/cardbaton $(DESTDIR)$(COMPDIR)/sshgpu
	rm -rf $(DESTDIR)$(LIBEXEC) $(DESTDIR)$(DOCDIR) $(if $(PYTHONDIR),$(DESTDIR)$(PYTHONDIR)/cardbaton)

clean:
	rm -rf build build-san

.PHONY: all test check unit demo bench fuzz fuzz-smoke soak install uninstall clean
.SECONDARY:

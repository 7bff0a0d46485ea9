#!/usr/bin/env python3
"""tests/soak/check.py --dir RUN_DIR --build BUILD --config CONFIG

The invariants of a fault run (tests/soak/soak), checked once the queue
has drained and the daemon has stopped.  Sources: the spool's records
(queued/ running/ paused/ done/ rejected/), `cardbaton status --json
--all`, each host's state directory (attempts/ID.state, the attempt and
lease locks), the effects the jobs wrote themselves (tests/soak/job.sh:
effects/JOBID, violations) and what the driver did (plan, faults/).

 1. Nothing vanishes: every submitted job has exactly one record, none
    was rejected, and status --json --all agrees with the record.
 2. Every job is terminal, or legitimately waiting: a job planned to
    wait (pinned to host2's busy card 1) is `queued` and never started
    (or `cancelled`, if the run cancelled it).  The outcome fits the
    plan: exit 0 -> succeeded; exit 3 -> failed, exit_code 3; a 1 s
    time limit on a 4 s job -> failed, reason `timeout`.  Other outcomes
    are legitimate only after the run did something to that job:
    `cancelled` after a cancel, `lost` after a kill of its attempt's
    worker (`worker_kill`) or of the whole attempt (`attempt_kill`),
    `failed` by a signal after an attempt_kill.
 3. Run at most once: no job has more than one `start` effect (a
    resumable job of a --preempt run: none per attempt, and each but the
    last one `paused` in the record after its `pause` effect: it was
    preempted, and resumed from its checkpoint).  A succeeded (or
    exit-3 failed) job has exactly one `start` and one `end` of the
    attempt the record ends with.  A `start` is never
    from an attempt the record calls `aborted` (never started), and it
    ran on the node and the cards the record names.
 4. Truly lost.  A `lost` job's last attempt
      - was killed by the run (worker_kill or attempt_kill): a lost
        verdict on an attempt nobody touched is a false loss;
      - is `lost` in the node's own state file: the worker never wrote
        a final status (succeeded, failed, cancelled) for it, and the
        node still knows the attempt (a verdict of "the node has no
        record of this attempt" is a false loss);
      - was dead when declared lost: no effect of that attempt (start
        or end) is later than the verdict (the attempt's `finished`),
        and at the end no process holds any file of the attempt and its
        lock is free;
      - was not run again: the job has at most one start (3.).
 5. No card held by two jobs at once, and no user past max_gpus: no
    OVERLIMIT line (a lab's run: job.sh of the limited user's jobs takes
    one of its max_gpus slots a card); no DOUBLE line in `violations`
    (each job takes a non-blocking flock per card in
    CUDA_VISIBLE_DEVICES and holds it while it runs; a sharing job a
    shared one, so no exclusive job is ever beside a sharer), no
    OVERSHARE line (a sharer takes one of max_jobs_per_gpu slots a
    card: never more sharers at once), both counted as double-booked;
    and no job ever got a busy or excluded card (host2 card 1, host3
    cards 0, 6, 7).
 6. The nodes agree with the spool: every attempt with a state file on
    a host is an attempt of some record; an attempt the record calls
    `aborted` has no state file (the worker answered busy and left no
    trace); the node's final state of every other attempt of a finished
    job is the record's; after the drain no attempt is alive (lock held,
    or a process holding its files) and no card lease is held.
 7. Each job ends once: the daemon's log has at most one final verdict
    (succeeded, failed, cancelled, lost) per job.
 8. The driver's own findings (faults/driver): the daemon never exited
    by itself, exited 0 on SIGTERM, no sanitizer report, the queue
    drained in time, every submit succeeded.
 9. Each job ran as the account it should: every `start` effect names
    (`id -un`) the record's `owner` in a --run-as run (meta `run_as 1`:
    host1 is a `run_as: owner` node), the daemon's account (root)
    otherwise; a --run-as run's attempts are each in its owner's state
    directory (statedirs: "DIR ACCOUNT"), none in root's there
    (nostatedirs), and no lease is in a state directory's own leases/:
    every one is in the node's lease_dir (leasedirs), whose locks are
    all free after the drain.

Prints the violations, then the figures, then "SOAK_RESULT {json}".
Exit 0 when there is no violation, 1 otherwise.
"""
import argparse
import fcntl
import json
import os
import re
import subprocess
import sys

FINAL = {"succeeded", "failed", "cancelled", "lost"}


def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [l.rstrip("\n") for l in f]
    except FileNotFoundError:
        return []


def wire_parse(text):
    """One wire record (LAYOUT.md section 10): KEY SP VALUE lines, 'end'."""
    rec = {}
    for line in text.split("\n"):
        if line == "end":
            break
        if not line:
            continue
        key, _, val = line.partition(" ")
        val = re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), val)
        rec.setdefault(key, []).append(val)
    return {k: (v[0] if len(v) == 1 else v) for k, v in rec.items()}


def lock_free(path):
    """True when nobody holds a flock on PATH (or it does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def holders(prefixes):
    """{path under one of PREFIXES: [pids]} for every open descriptor."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if any(t.startswith(p) for p in prefixes):
                out.setdefault(t, []).append(int(pid))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--config", required=True)
    a = ap.parse_args()
    d = a.dir
    v = []  # violations

    meta = dict(l.split(" ", 1) for l in read_lines(f"{d}/meta") if " " in l)
    plan = {}
    for l in read_lines(f"{d}/plan"):
        p = l.split(" ", 2)
        plan[p[0]] = {"outcome": p[1], "desc": p[2] if len(p) > 2 else ""}
    killed = {}  # aid -> set of kinds
    for l in read_lines(f"{d}/faults/killed"):
        p = l.split()
        if len(p) >= 2:
            killed.setdefault(p[1], set()).add(p[0])
    cancelled = set(read_lines(f"{d}/faults/cancelled"))
    counts = {}
    for l in read_lines(f"{d}/faults/counts"):
        k, _, n = l.partition(" ")
        counts[k] = int(n)
    forbidden = set(x for x in read_lines(f"{d}/forbidden") if x)
    # "DIR" or "DIR ACCOUNT" (--run-as: the account whose state it is).
    statedirs, sd_account = [], {}
    for x in read_lines(f"{d}/statedirs"):
        if not x:
            continue
        path, _, acct = x.partition(" ")
        statedirs.append(path)
        if acct:
            sd_account[path] = acct
    leasedirs = [x for x in read_lines(f"{d}/leasedirs") if x]
    nostatedirs = [x for x in read_lines(f"{d}/nostatedirs") if x]
    run_as = meta.get("run_as") == "1"
    for l in read_lines(f"{d}/faults/driver"):
        if l and not l.startswith(" "):
            v.append(f"driver: {l}")

    # ---- records ------------------------------------------------------
    spool = f"{d}/spool"
    recs, where = {}, {}
    for sub in ("queued", "running", "paused", "done"):
        try:
            names = os.listdir(f"{spool}/{sub}")
        except FileNotFoundError:
            continue
        for n in names:
            if n.startswith(".") or not n.endswith(".job"):
                continue
            try:
                with open(f"{spool}/{sub}/{n}") as f:
                    r = json.load(f)
            except (OSError, ValueError) as e:
                v.append(f"spool: {sub}/{n}: unreadable record: {e}")
                continue
            jid = r["id"]
            if jid in recs:
                v.append(f"job {jid}: two records ({where[jid]}, {sub}/{n}) after the daemon stopped")
                if r.get("rev", 0) <= recs[jid].get("rev", 0):
                    continue
            recs[jid], where[jid] = r, f"{sub}/{n}"
    rejected = set()
    try:
        for n in os.listdir(f"{spool}/rejected"):
            if n.endswith(".reason"):
                rejected.add(str(int(n[:-7])))
    except FileNotFoundError:
        pass
    leftovers = []
    for sub in ("new", "incoming"):
        try:
            leftovers += [f"{sub}/{n}" for n in os.listdir(f"{spool}/{sub}") if not n.startswith(".")]
        except FileNotFoundError:
            pass
    if leftovers:
        v.append(f"spool: submissions never accepted: {' '.join(leftovers[:20])}")

    try:
        st = subprocess.run([f"{a.build}/cardbaton-status", "--config", a.config, "--json", "--all"],
                            capture_output=True, text=True,
                            timeout=120 * float(os.environ.get("CB_TEST_TIMEOUT_SCALE") or 1))
        status = {j["id"]: j for j in json.loads(st.stdout)["jobs"]} if st.returncode == 0 else None
        if status is None:
            v.append(f"cardbaton status --json --all exited {st.returncode}: {st.stderr.strip()[:300]}")
    except (subprocess.TimeoutExpired, ValueError, KeyError) as e:
        status = None
        v.append(f"cardbaton status --json --all: {e}")

    # ---- effects ---------------------------------------------------------
    starts, ends, pauses = {}, {}, {}
    for n in os.listdir(f"{d}/effects"):
        for l in read_lines(f"{d}/effects/{n}"):
            p = l.split()
            if len(p) >= 6 and p[0] == "start":
                starts.setdefault(n, []).append({"aid": p[1], "host": p[2],
                                                 "uuids": [] if p[3] == "-" else p[3].split(","),
                                                 "pid": p[4], "ms": int(p[5]),
                                                 "user": p[6] if len(p) > 6 else None})
            elif len(p) >= 3 and p[0] == "end":
                ends.setdefault(n, []).append({"aid": p[1], "ms": int(p[2])})
            elif len(p) >= 3 and p[0] == "pause":
                pauses.setdefault(n, set()).add(p[1])
            else:
                v.append(f"effects/{n}: malformed line {l!r}")
    doubles, overlimit = [], []
    for l in read_lines(f"{d}/violations"):
        p = l.split()
        if p and p[0] == "DOUBLE":
            doubles.append(l)
            v.append(f"card double-booked: {l}")
        elif p and p[0] == "OVERSHARE":
            doubles.append(l)
            v.append(f"card shared by more jobs than max_jobs_per_gpu: {l}")
        elif p and p[0] == "OVERLIMIT":
            overlimit.append(l)
            v.append(f"a user held more cards at once than max_gpus: {l}")
        elif l:
            v.append(f"violations: {l}")

    # ---- nodes -------------------------------------------------------------
    node_state = {}  # aid -> (statedir, record)
    alive_aids = set()
    prefixes = [f"{s}/attempts/" for s in statedirs]
    held = holders(prefixes + [f"{s}/leases/" for s in statedirs] + [f"{x}/" for x in leasedirs])
    for s in statedirs:
        att = f"{s}/attempts"
        try:
            names = os.listdir(att)
        except FileNotFoundError:
            continue
        for n in names:
            if n.endswith(".state") and not n.startswith("."):
                with open(f"{att}/{n}", encoding="utf-8", errors="replace") as f:
                    node_state[n[:-6]] = (s, wire_parse(f.read()))
            elif os.path.isdir(f"{att}/{n}") and not lock_free(f"{att}/{n}/lock"):
                alive_aids.add(n)
        try:
            for u in os.listdir(f"{s}/leases"):
                if leasedirs:
                    v.append(f"{s}: lease {u} in the state directory, not in the lease_dir {leasedirs[0]}")
                if not lock_free(f"{s}/leases/{u}"):
                    v.append(f"{s}: lease {u} still held after the drain (pids {held.get(f'{s}/leases/{u}', [])})")
        except FileNotFoundError:
            pass
    # The lease_dir: cards' leases (UUID) and the holders' marks (UUID=ID,
    # UUID+ID); a mark left by an attempt killed is stale (its lock free).
    lease_files = 0
    for ld in leasedirs:
        try:
            names = os.listdir(ld)
        except FileNotFoundError:
            v.append(f"lease_dir {ld}: missing")
            continue
        for u in names:
            if u.startswith("."):
                continue
            lease_files += 1
            if not lock_free(f"{ld}/{u}"):
                v.append(f"lease_dir {ld}: {u} still held after the drain (pids {held.get(f'{ld}/{u}', [])})")
    for s in nostatedirs:
        try:
            names = [n for n in os.listdir(f"{s}/attempts") if not n.startswith(".")]
        except FileNotFoundError:
            names = []
        if names:
            v.append(f"{s}: attempts in the daemon's own account on a run_as: owner node: {sorted(names)[:10]}")
    for path, pids in held.items():
        m = re.search(r"/attempts/([0-9a-f-]+)/", path)
        if m:
            alive_aids.add(m.group(1))
    for aid in sorted(alive_aids):
        pids = sorted({p for path, ps in held.items() if f"/attempts/{aid}/" in path for p in ps})
        v.append(f"attempt {aid}: still alive after the drain (lock held; pids {pids})")

    # ---- per job ---------------------------------------------------------------
    states = {}
    lost_verdicts, lost_unexplained, run_twice = 0, 0, 0
    wrong_account, starts_checked = 0, 0
    rec_aids = set()
    for r in recs.values():
        for at in r.get("attempts") or []:
            rec_aids.add(at["id"])
    for aid, (s, nr) in sorted(node_state.items()):
        if aid not in rec_aids:
            v.append(f"{s}: attempt {aid} ({nr.get('state')}) is in no job record")

    for jid in sorted(plan, key=int):
        p = plan[jid]
        outcome = p["outcome"]
        tag = f"job {jid} ({p['desc']}; planned {outcome})"
        if jid in rejected:
            v.append(f"{tag}: rejected")
            continue
        r = recs.get(jid)
        if not r:
            v.append(f"{tag}: no record: the job vanished")
            lost_unexplained += 1
            continue
        state = r["state"]
        states[state] = states.get(state, 0) + 1
        if status is not None:
            sj = status.get(jid)
            if not sj or sj["state"] != state:
                v.append(f"{tag}: status --json says {sj and sj['state']}, the record {state}")
        atts = r.get("attempts") or []
        last = atts[-1] if atts else None
        laid = last["id"] if last else None
        kinds = killed.get(laid, set()) if laid else set()
        js, je = starts.get(jid, []), ends.get(jid, [])
        # A resumable job's earlier attempts, each preempted: paused in
        # the record after its pause effect, started once.  The checks
        # below are of the last attempt's effects.
        if "--resume-command" in p["desc"]:
            for x in [s for s in js if s["aid"] != laid]:
                at = next((t for t in atts if t["id"] == x["aid"]), None)
                if not at or at["state"] != "paused" or x["aid"] not in pauses.get(jid, set()):
                    run_twice += 1
                    v.append(f"{tag}: RUN TWICE: attempt {x['aid']} started, and is "
                             f"{at and at['state']} without a checkpoint, before {laid}")
            per = {}
            for x in js:
                per[x["aid"]] = per.get(x["aid"], 0) + 1
            for a2, k in per.items():
                if k > 1:
                    run_twice += 1
                    v.append(f"{tag}: RUN TWICE: attempt {a2} started {k} times")
            js = [s for s in js if s["aid"] == laid]
        if len(js) > 1:
            run_twice += 1
            v.append(f"{tag}: RUN TWICE: {len(js)} starts: {[x['aid'] for x in js]}")
        for x in js:
            at = next((t for t in atts if t["id"] == x["aid"]), None)
            if not at:
                v.append(f"{tag}: started as attempt {x['aid']}, which its record does not have")
                continue
            if at["state"] == "aborted":
                v.append(f"{tag}: attempt {x['aid']} started although the record says it never did (aborted: {at.get('reason')})")
            if x["aid"] != laid:
                v.append(f"{tag}: started as attempt {x['aid']}, not its last attempt {laid}")
            if at.get("node") != x["host"]:
                v.append(f"{tag}: attempt {x['aid']} ran on {x['host']}, the record says {at.get('node')}")
            if sorted(at.get("gpu_uuids") or []) != sorted(x["uuids"]):
                v.append(f"{tag}: attempt {x['aid']} had cards {x['uuids']}, the record says {at.get('gpu_uuids')}")
            bad = forbidden.intersection(x["uuids"])
            if bad:
                v.append(f"{tag}: attempt {x['aid']} was given a busy or excluded card: {sorted(bad)}")
        # Who each start ran as: the owner on a run_as: owner node, the
        # daemon's account (root over ssh) otherwise.
        want = r.get("owner") if run_as else "root"
        for x in starts.get(jid, []):
            starts_checked += 1
            if x["user"] != want:
                wrong_account += 1
                v.append(f"{tag}: attempt {x['aid']} ran as {x['user']}, not "
                         f"{'its owner ' if run_as else 'the daemon account '}{want}")
        if run_as:
            for at in atts:
                ns = node_state.get(at["id"])
                if ns and sd_account.get(ns[0]) != r.get("owner"):
                    wrong_account += 1
                    v.append(f"{tag}: attempt {at['id']} is in {ns[0]} ({sd_account.get(ns[0])}'s), "
                             f"not its owner {r.get('owner')}'s state directory")
        for x in je:
            if x["aid"] not in [s["aid"] for s in js]:
                v.append(f"{tag}: an end of attempt {x['aid']} without its start")

        # The outcome against the plan.
        exit_code = last.get("exit_code") if last else None
        reason = r.get("reason") or ""
        ok = False
        if state == "queued":
            ok = outcome == "wait" and not js
            if not ok:
                v.append(f"{tag}: still queued after the drain ({reason})" if outcome != "wait"
                         else f"{tag}: waiting, but it started: {[x['aid'] for x in js]}")
            continue
        if state not in FINAL:
            v.append(f"{tag}: {state} after the drain ({reason})")
            continue
        if state == "cancelled":
            ok = jid in cancelled and len(js) <= 1 and len(je) <= 1
            if jid not in cancelled:
                v.append(f"{tag}: cancelled, but the run never cancelled it ({reason})")
        elif state == "lost":
            lost_verdicts += 1
            ok = True
            why = []
            if not kinds:
                why.append("nobody killed its worker (false loss)")
            ns = node_state.get(laid)
            if not ns:
                why.append("the node has no state file for it")
            elif ns[1].get("state") != "lost":
                why.append(f"the node says {ns[1].get('state')} ({ns[1].get('reason')})")
            fin = last.get("finished_ms")
            for x in [s for s in js if s["aid"] == laid] + [e for e in je if e["aid"] == laid]:
                if fin is None or x["ms"] > fin:
                    why.append(f"an effect at {x['ms']} after the verdict at {fin}")
            if laid in alive_aids:
                why.append("still alive")
            if why:
                ok = False
                lost_unexplained += 1
                v.append(f"{tag}: lost ({reason}) but not truly lost: attempt {laid}: {'; '.join(why)}")
        elif outcome == "wait":
            v.append(f"{tag}: {state} ({reason}), but it should wait for ever")
        elif state == "failed" and "attempt" in kinds and reason.startswith("killed by signal"):
            ok = len(js) <= 1
        elif state == "succeeded":
            ok = outcome == "ok" and exit_code == 0
            if not ok:
                v.append(f"{tag}: succeeded (exit {exit_code}), planned {outcome}")
        elif state == "failed":
            if outcome == "fail":
                ok = exit_code == 3
            elif outcome == "timeout":
                ok = reason == "timeout"
            if not ok:
                v.append(f"{tag}: failed ({reason}; exit {exit_code}), planned {outcome}")
        if state in ("succeeded",) or (state == "failed" and outcome == "fail" and ok):
            if len(js) != 1 or len(je) != 1 or js[0]["aid"] != laid or je[0]["aid"] != laid:
                ok = False
                v.append(f"{tag}: {state}, but its effect is not exactly once: starts {[x['aid'] for x in js]}, "
                         f"ends {[x['aid'] for x in je]}, last attempt {laid}")

        # The node's word on each attempt of this finished job.
        for at in atts:
            ns = node_state.get(at["id"])
            if at["state"] == "aborted":
                # A staged attempt given back (the baton) leaves its
                # final word, unstaged: it never started.
                if ns and ns[1].get("state") != "unstaged":
                    v.append(f"{tag}: attempt {at['id']} is aborted in the record, but the node has its "
                             f"state file ({ns[1].get('state')}): it may have run")
                continue
            if not ns:
                if at is last and state != "cancelled":
                    v.append(f"{tag}: attempt {at['id']} ({at['state']}) has no state file on {at.get('node')}")
                continue
            if ns[1].get("state") != at["state"]:
                v.append(f"{tag}: attempt {at['id']} is {at['state']} in the record, "
                         f"{ns[1].get('state')} on the node ({ns[1].get('reason')})")

    # Each job ends once: one final verdict in the daemon's log.
    verdicts = {}
    copied, copy_failed = [], 0
    for l in read_lines(f"{d}/daemon.log"):
        m = re.match(r"cardbaton-spoold: job (\d+): checkpoint copied to (\S+): ", l)
        if m:
            copied.append(m.group(1))
        copy_failed += bool(re.match(r"cardbaton-spoold: job \d+: checkpoint transfer from .* failed: ", l))
        m = re.match(r"cardbaton-spoold: job (\d+): (succeeded|failed|cancelled|lost)\b", l)
        if m:
            verdicts.setdefault(m.group(1), []).append(m.group(2))
    for jid, vs in sorted(verdicts.items(), key=lambda x: int(x[0])):
        if len(vs) > 1:
            v.append(f"job {jid}: ended {len(vs)} times: {', '.join(vs)}")

    extra = set(recs) - set(plan)
    if extra:
        v.append(f"spool: records of jobs nobody submitted: {sorted(extra, key=int)[:20]}")

    # ---- report ------------------------------------------------------------------
    for x in v:
        print(f"soak: VIOLATION: {x}")
    jobs = len(plan)
    total_faults = sum(counts.values())
    print(f"soak: seed {meta.get('seed')}, {meta.get('elapsed', '?')} s "
          f"({meta.get('seconds')} s of faults, drained in {meta.get('drain_seconds', '?')} s), "
          f"{meta.get('hosts')} hosts")
    print(f"soak: jobs {jobs}: " + ", ".join(f"{k} {states[k]}" for k in sorted(states)))
    print(f"soak: faults injected {total_faults}: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    print(f"soak: lost verdicts {lost_verdicts} (each after the run killed that attempt's worker)")
    yields = sum(len(x) for x in pauses.values())
    if yields:
        print(f"soak: preempted and resumed {yields} times ({len(pauses)} jobs)")
    if copied or copy_failed:
        print(f"soak: checkpoints copied to another host {len(copied)} times ({len(set(copied))} jobs), "
              f"{copy_failed} copies failed or cut")
    users = sorted({x["desc"].rsplit(" user=", 1)[1] for x in plan.values() if " user=" in x["desc"]})
    if users:
        print(f"soak: users {len(users)} ({', '.join(users)}), max_gpus passed {len(overlimit)}")
    if run_as:
        print(f"soak: run_as owner: {starts_checked} starts, {wrong_account} not as the job's owner; "
              f"{len(sd_account)} members' state directories, {lease_files} files in the lease_dir")
    print(f"soak: jobs lost {lost_unexplained}, run twice {run_twice}, cards double-booked {len(doubles)}, "
          f"wrong account {wrong_account}, violations {len(v)}")
    res = {
        "seed": int(meta.get("seed", 0)), "seconds": int(meta.get("seconds", 0)),
        "elapsed_seconds": int(meta.get("elapsed", 0)), "drain_seconds": int(meta.get("drain_seconds", 0)),
        "hosts": int(meta.get("hosts", 0)), "jobs": jobs, "states": states,
        "faults": counts, "faults_total": total_faults, "lost_verdicts": lost_verdicts,
        "yields": sum(len(x) for x in pauses.values()),
        "jobs_lost": lost_unexplained, "run_twice": run_twice, "double_booked": len(doubles),
        "users": len(users), "limits_passed": len(overlimit), "violations": len(v),
        "run_as": run_as, "wrong_account": wrong_account,
        "checkpoints_copied": len(copied), "copies_failed": copy_failed,
    }
    print("SOAK_RESULT " + json.dumps(res, sort_keys=True))
    return 1 if v else 0


if __name__ == "__main__":
    sys.exit(main())

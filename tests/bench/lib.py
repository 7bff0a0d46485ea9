#!/usr/bin/env python3
"""Helpers for tests/bench/run: timing, statistics, the result table."""
import json, os, statistics, subprocess, sys, time

def pct(xs, p):
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))]

def summary(xs):
    return {"median": statistics.median(xs), "p90": pct(xs, 0.9), "n": len(xs)}

def cmd_timeit(args):
    # timeit N CMD... : run CMD N times, one process each; per-call ms.
    n = int(args[0]); cmd = args[1:]
    xs = []
    dn = open(os.devnull, "w")
    for _ in range(n):
        t = time.perf_counter_ns()
        r = subprocess.run(cmd, stdout=dn, stderr=dn)
        xs.append((time.perf_counter_ns() - t) / 1e6)
        if r.returncode != 0:
            sys.exit(f"timeit: {cmd} exited {r.returncode}")
    print(json.dumps(summary(xs)))

def cmd_gaps(args):
    s = [int(x) for x in open(args[0])]
    e = [int(x) for x in open(args[1])]
    gaps = [(s[i + 1] - e[i]) / 1e6 for i in range(len(s) - 1)]
    print(json.dumps(summary(gaps)))

def cmd_delays(args):
    # delays FROM TO : line by line, TO minus FROM (ns), in ms.
    a = [int(x) for x in open(args[0])]
    b = [int(x) for x in open(args[1])]
    print(json.dumps(summary([(b[i] - a[i]) / 1e6 for i in range(len(a))])))

def cmd_flow(args):
    # flow ENDS T0 : ENDS one time (ns) a line, T0 a start (ns): the rate
    # from the first end to the last (a second), and the first end's
    # seconds after T0.
    e = sorted(int(x) for x in open(args[0])); t0 = int(args[1])
    print(json.dumps({"rate": (len(e) - 1) / ((e[-1] - e[0]) / 1e9), "first_s": (e[0] - t0) / 1e9}))

def cmd_drop(args):
    # drop SPOOL N JSON : write N job files through tmp/ into new/, fast.
    spool, n, body = args[0], int(args[1]), args[2].encode()
    tmp, new = os.path.join(spool, "tmp"), os.path.join(spool, "new")
    for i in range(n):
        name = f"bench-{i:07d}.job"
        p = os.path.join(tmp, name)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, body)
        os.close(fd)
        os.rename(p, os.path.join(new, name))

def cmd_fsfloor(args):
    # fsfloor SPOOL N : a submit's file operations alone, no process: a
    # new file in tmp/, written, synced, renamed into new/, new/ synced;
    # per-file ms (the submit row's floor, on the same directories).
    spool, n = args[0], int(args[1])
    tmp, new = os.path.join(spool, "tmp"), os.path.join(spool, "new")
    dfd = os.open(new, os.O_RDONLY | os.O_DIRECTORY)
    xs = []
    for i in range(n):
        name = f"floor-{os.getpid()}-{i:07d}.job"
        p = os.path.join(tmp, "." + name)
        t = time.perf_counter_ns()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b'{"command":["true"]}')
        os.fsync(fd)
        os.close(fd)
        os.rename(p, os.path.join(new, name))
        os.fsync(dfd)
        xs.append((time.perf_counter_ns() - t) / 1e6)
    os.close(dfd)
    print(json.dumps(summary(xs)))

def cmd_fabricate(args):
    # fabricate RECORD DONEDIR N : N copies of a finished record, IDs 1..N.
    rec = json.load(open(args[0])); d = args[1]; n = int(args[2])
    for i in range(1, n + 1):
        r = dict(rec)
        for k in ("id", "seq"):
            if k in r:
                r[k] = str(i) if isinstance(r[k], str) else i
        if "name" in r:
            r["name"] = f"history-{i}"
        p = os.path.join(d, f".{i:010d}.tmp")
        with open(p, "w") as f:
            json.dump(r, f)
        os.rename(p, os.path.join(d, f"{i:010d}.job"))

def fmt(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"

def cmd_table(args):
    # table RESULTS.jsonl OUT.md : print the table and write it as markdown.
    rows = [json.loads(l) for l in open(args[0]) if l.strip()]
    head = ["benchmark", "unit", "CardBaton median", "CardBaton p90",
            "tsp median", "nq median", "other", "ratio", "target", "result"]
    out = []
    for r in rows:
        peers = r.get("peers", {})
        t = r["target"]
        ratio = None
        if t.get("none"):
            ok, tgt = True, "(none)"
            # Beside a figure of its own (other_value): the ratio, shown.
            if r.get("other_value") and r["median"] is not None:
                ratio = r["median"] / r["other_value"]
        elif t.get("vs"):
            base = peers.get(t["vs"]) if t["vs"] in peers else r.get("other_value")
            if base and r["median"] is not None:
                ratio = r["median"] / base
            if "plus" in t:
                # At most the baseline plus a fixed cost (in the unit).
                ok = ratio is not None and r["median"] <= base + t["plus"]
                tgt = f"<= {t['vs']} + {t['plus']} {r['unit']}"
            else:
                ok = ratio is not None and ratio <= t["max"]
                tgt = f"<= {t['max']}x {t['vs']}"
        elif "min" in t:
            ok = r["median"] is not None and r["median"] >= t["min"]
            tgt = f">= {t['min']} {r['unit']}"
        else:
            ok = r["median"] is not None and r["median"] <= t["max"]
            tgt = f"<= {t['max']} {r['unit']}"
            for p in ("tsp", "nq"):
                if peers.get(p) and ratio is None and r["median"] is not None:
                    ratio = r["median"] / peers[p]
        if r.get("extra_ok") is False:
            ok = False
        res = "met" if ok else "MISSED"
        if t.get("none"):
            res = "-"
        if r.get("skipped"):
            res, tgt = "skipped", tgt
        out.append([r["bench"], r["unit"], fmt(r.get("median")), fmt(r.get("p90")),
                    fmt(peers.get("tsp")), fmt(peers.get("nq")), r.get("other", ""),
                    fmt(ratio), tgt, res + (" (" + r["note"] + ")" if r.get("note") else "")])
    w = [max(len(str(x[i])) for x in out + [head]) for i in range(len(head))]
    line = lambda c: "  ".join(str(x).ljust(w[i]) for i, x in enumerate(c))
    print(line(head)); print(line(["-" * x for x in w]))
    for c in out:
        print(line(c))
    with open(args[1], "w") as f:
        f.write(f"<!-- tests/bench/run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                f"{os.uname().nodename}, {os.cpu_count()} CPUs -->\n\n")
        f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for c in out:
            f.write("| " + " | ".join(str(x).replace("|", "\\|") for x in c) + " |\n")
        f.write("\nratio: CardBaton median / tsp median (or / the named baseline); "
                "peers run in the same run on the same machine.\n")

def cmd_row(args):
    # row FILE JSON : append a result row.
    with open(args[0], "a") as f:
        f.write(json.dumps(json.loads(args[1])) + "\n")

if __name__ == "__main__":
    globals()["cmd_" + sys.argv[1]](sys.argv[2:])

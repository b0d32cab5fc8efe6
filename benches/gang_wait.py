#!/usr/bin/env python3
"""Large-gang waits on a simulator scenario, over seeds, per configuration.

Runs `kuota simulate --json` once per (configuration, seed) and prints, per
configuration, the mean and standard deviation across seeds of: gang-128 and
gang-64 mean wait, small-job (<= 8 GPU) mean wait, GPU utilization, makespan,
preemptions, and the totals of unfinished workloads and anomalies. Each
configuration is a quoted string of extra flags.

  python3 benches/gang_wait.py --kuota target/debug/kuota --seeds 1-10 \\
      "--placement kuota" "--placement kueue-bestfit" "--placement first-fit" \\
      "--placement kuota --gang-reservation-horizon-ms 86400000"

`--sweep` prints, per configuration, what a correctness sweep counts instead:
runs with anomalies, anomalies, runs stopped early (the simulator's safety
stops), unfinished workloads and preemptions mean / max, and lists every run
with an anomaly or an unfinished workload (scenario, seed, flags) to replay:

  python3 benches/gang_wait.py --sweep --seeds 1-100 --jobs 2 \\
      "--placement kuota" "--placement kueue-bestfit" "--placement first-fit" \\
      "--placement kuota --fair-sharing" ...
"""
import argparse
import concurrent.futures
import json
import shlex
import statistics
import subprocess

SMALL = ("gang-8", "gpu-1", "gpu-2", "gpu-4")


def run(kuota, scenario, seed, flags):
    scen = ["--scenario-dir", scenario[4:]] if scenario.startswith("dir:") else ["--scenario", scenario]
    out = subprocess.run(
        [kuota, "simulate"] + scen + ["--seed", str(seed), "--json"] + shlex.split(flags),
        check=True, capture_output=True, text=True).stdout
    return measure(json.loads(out), seed)


def measure(d, seed):
    """The figures of one run's `--json` report."""
    cls = {c["class"]: c for c in d["classes"]}

    def wait(names):
        n = sum(cls[c]["timeToAdmission"]["count"] for c in names if c in cls)
        s = sum(cls[c]["timeToAdmission"]["meanMs"] * cls[c]["timeToAdmission"]["count"]
                for c in names if c in cls)
        return s / n / 60000 if n else 0.0

    gpu = next(f for f in d["flavors"] if f["resource"] == "nvidia.com/gpu")
    t = d["totals"]
    return {
        "seed": seed,
        "gang-128": wait(["gang-128"]),
        "gang-64": wait(["gang-64"]),
        "small": wait(SMALL),
        "util": 100 * gpu["utilization"],
        "makespan": t["makespanMs"] / 3600000,
        "preempt": t["preemptions"],
        "unfinished": t["workloads"] - t["finished"],
        "truncated": bool(t["truncated"]),
        "anomalies": len(d["anomalies"]),
        "first_anomaly": d["anomalies"][0] if d["anomalies"] else "",
        "reservations": t.get("gangReservationsMoved", 0) + t.get("gangReservationsDropped", 0),
    }


def seeds(text):
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def table(a, results):
    keys = ["gang-128", "gang-64", "small", "util", "makespan", "preempt"]
    print("| configuration | gang-128 wait (min) | gang-64 wait (min) | small-job wait (min) "
          "| GPU utilization (%) | makespan (h) | preemptions | unfinished | anomalies |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cfg, rows in results:
        cells = []
        for k in keys:
            v = [r[k] for r in rows]
            cells.append(f"{statistics.mean(v):.1f} ± {statistics.pstdev(v):.1f}")
        unfinished = sum(r["unfinished"] for r in rows)
        anomalies = sum(r["anomalies"] for r in rows)
        print(f"| `{cfg}` | " + " | ".join(cells) + f" | {unfinished} | {anomalies} |")


def sweep(a, results):
    print("| configuration | runs | runs with anomalies | anomalies | runs stopped early "
          "| workloads unfinished | preemptions mean / max |")
    print("|---|---|---|---|---|---|---|")
    bad = []
    for cfg, rows in results:
        pre = [r["preempt"] for r in rows]
        print(f"| `{cfg}` | {len(rows)} | {sum(1 for r in rows if r['anomalies'])} "
              f"| {sum(r['anomalies'] for r in rows)} | {sum(1 for r in rows if r['truncated'])} "
              f"| {sum(r['unfinished'] for r in rows)} | {statistics.mean(pre):.1f} / {max(pre)} |")
        bad += [(cfg, r) for r in rows if r["anomalies"] or r["unfinished"] or r["truncated"]]
    for cfg, r in bad:
        print(f"- {a.scenario} seed {r['seed']} `{cfg}`: {r['anomalies']} anomalies, "
              f"{r['unfinished']} unfinished: {r['first_anomaly']}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kuota", default="target/debug/kuota")
    p.add_argument("--scenario", default="gpu-gangs",
                   help="a built-in scenario, or dir:PATH for a scenario directory")
    p.add_argument("--seeds", default="1-10", type=seeds)
    p.add_argument("--jobs", default=1, type=int, help="runs at once")
    p.add_argument("--sweep", action="store_true", help="count anomalies, not waits")
    p.add_argument("configs", nargs="+")
    a = p.parse_args()
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = [(cfg, [pool.submit(run, a.kuota, a.scenario, s, cfg) for s in a.seeds])
                   for cfg in a.configs]
        results = [(cfg, [f.result() for f in fs]) for cfg, fs in futures]
    (sweep if a.sweep else table)(a, results)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Large-gang waits on a simulator scenario, over seeds, per configuration.

Runs `kuota simulate --json` once per (configuration, seed) and prints, per
configuration, the mean and standard deviation across seeds of: gang-128 and
gang-64 mean wait, small-job (<= 8 GPU) mean wait, GPU utilization, makespan,
preemptions and anomalies. Each configuration is a quoted string of extra flags.

  python3 benches/gang_wait.py --kuota target/debug/kuota --seeds 1-10 \\
      "--placement kuota" "--placement kueue-bestfit" "--placement first-fit" \\
      "--placement kuota --gang-reservation-horizon-ms 86400000"
"""
import argparse
import json
import shlex
import statistics
import subprocess

SMALL = ("gang-8", "gpu-1", "gpu-2", "gpu-4")


def run(kuota, scenario, seed, flags):
    out = subprocess.run(
        [kuota, "simulate", "--scenario", scenario, "--seed", str(seed), "--json"]
        + shlex.split(flags),
        check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    cls = {c["class"]: c for c in d["classes"]}

    def wait(names):
        n = sum(cls[c]["timeToAdmission"]["count"] for c in names if c in cls)
        s = sum(cls[c]["timeToAdmission"]["meanMs"] * cls[c]["timeToAdmission"]["count"]
                for c in names if c in cls)
        return s / n / 60000 if n else 0.0

    gpu = next(f for f in d["flavors"] if f["resource"] == "nvidia.com/gpu")
    return {
        "gang-128": wait(["gang-128"]),
        "gang-64": wait(["gang-64"]),
        "small": wait(SMALL),
        "util": 100 * gpu["utilization"],
        "makespan": d["totals"]["makespanMs"] / 3600000,
        "preempt": d["totals"]["preemptions"],
        "unfinished": d["totals"]["workloads"] - d["totals"]["finished"],
        "anomalies": len(d["anomalies"]),
    }


def seeds(text):
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kuota", default="target/debug/kuota")
    p.add_argument("--scenario", default="gpu-gangs")
    p.add_argument("--seeds", default="1-10", type=seeds)
    p.add_argument("configs", nargs="+")
    a = p.parse_args()
    keys = ["gang-128", "gang-64", "small", "util", "makespan", "preempt"]
    print("| configuration | gang-128 wait (min) | gang-64 wait (min) | small-job wait (min) "
          "| GPU utilization (%) | makespan (h) | preemptions | unfinished | anomalies |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cfg in a.configs:
        rows = [run(a.kuota, a.scenario, s, cfg) for s in a.seeds]
        cells = []
        for k in keys:
            v = [r[k] for r in rows]
            cells.append(f"{statistics.mean(v):.1f} ± {statistics.pstdev(v):.1f}")
        unfinished = sum(r["unfinished"] for r in rows)
        anomalies = sum(r["anomalies"] for r in rows)
        print(f"| `{cfg}` | " + " | ".join(cells) + f" | {unfinished} | {anomalies} |")


if __name__ == "__main__":
    main()

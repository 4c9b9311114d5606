#!/usr/bin/env python3
"""Where one decode step's time goes, kernel by kernel, from an ncu run of `duet bench`.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \\
        ./duet bench --device cuda ... --prompt 8 --decode 3 > ncu.csv
    scripts/ncu_step_summary.py ncu.csv MARKER

A step is the kernels from one launch of MARKER (a kernel that runs once a step, e.g.
sample_with_ras_kernel for Drama 3, gather_embeddings_kernel for Nemotron-H) to the next; the last
complete step is summed by kernel name. ncu runs every kernel alone with cold caches, so the total is
an upper bound of what the kernels cost inside the recorded step.
"""
import csv
import sys
from collections import defaultdict


# Microseconds in one unit of what ncu printed (its first row after the header names the unit).
UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def rows(path):
    """(kernel name, microseconds) of every profiled kernel, in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    scale = 1e-3
    for row in csv.DictReader(lines):
        name = row.get("Kernel Name", "")
        value = row.get("gpu__time_duration.sum", "").replace(",", "")
        if value in UNITS:
            scale = UNITS[value]
            continue
        try:
            yield name, float(value) * scale
        except ValueError:
            continue


def main():
    path, marker = sys.argv[1], sys.argv[2]
    kernels = list(rows(path))
    starts = [i for i, (name, _) in enumerate(kernels) if marker in name]
    if len(starts) < 3:
        sys.exit(f"fewer than three {marker} launches in {path}: no complete step after the first")
    step = kernels[starts[-2]:starts[-1]]
    totals, counts = defaultdict(float), defaultdict(int)
    for name, us in step:
        short = name.split("(")[0].split("<")[0].replace("void ", "").split("::")[-1]
        totals[short] += us
        counts[short] += 1
    total = sum(totals.values())
    print(f"{'kernel':40} {'us':>9} {'launches':>8} {'us each':>8}")
    for name in sorted(totals, key=totals.get, reverse=True):
        print(f"{name[:40]:40} {totals[name]:9.1f} {counts[name]:8d} {totals[name] / counts[name]:8.2f}")
    print(f"{'all':40} {total:9.1f} {len(step):8d}")


if __name__ == "__main__":
    main()

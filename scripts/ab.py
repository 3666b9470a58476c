"""Two or more bf builds side by side, the builds alternating so a noisy machine slows them alike.

`--verb apply` (the default): W1's 12 monthly slices and W4's resume. Each build plans W1 into its
own scratch folder once; every run then applies a fresh hard-linked copy of that planned folder
(table, rehearsal and saved plan: Delta writers only add files). W4 is planned and crashed
(`BF_FAULT=after-commit:6`) afresh before each timed resume.

`--verb plan`: W1's `bf plan`, each run on a fresh hard-linked copy of the table, timed with the
CPU time it took (user + system): on two cores the plan's writes and comparisons share them, so
its CPU time moves less than its wall time when the machine is busy.

Prints medians.

    python3 scripts/ab.py --work /work/bench-work OLD_BF NEW_BF [--runs 9] [--verb plan]

`--work` is a `scripts/bench` work folder (its tables and inputs are made by a run of it).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # importing bench.py leaves no __pycache__ in the repository
sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402


SETTLE_S = 2.1


def planned(bf: str, work: Path, variant: str, folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    first, last = bench.month_start(12), bench.month_end(23)
    bench.planned_copy(work / f"orders-36m-{variant}", folder, work / "inputs", first, last)
    subprocess.run([bf, "plan", "plan.toml", "-q"], cwd=folder, capture_output=True, check=True, env=rooted(work))
    return folder


def rooted(work: Path, **extra: str) -> dict:
    """The environment with the work folder as bf's root: the inputs are in it, beside the scratch."""
    return dict(os.environ, BF_ROOT=str(work), **extra)


def plans(args) -> dict:
    times: dict[tuple[str, str], list[float]] = {}
    first, last = bench.month_start(12), bench.month_end(23)
    for variant in ["unpartitioned", "partitioned"]:
        for _ in range(args.runs):
            for bf in args.builds:
                folder = bench.fresh_scratch(args.work)
                bench.planned_copy(args.work / f"orders-36m-{variant}", folder, args.work / "inputs", first, last)
                planned = bench.measure([bf, "plan", "plan.toml", "-q"], folder, rooted(args.work))
                times.setdefault((f"W1 {variant} plan", bf), []).append(planned.seconds)
                times.setdefault((f"W1 {variant} plan CPU", bf), []).append(planned.cpu_seconds)
    return times


def timed_apply(bf: str, folder: Path, env: dict, expect_failure: bool = False) -> float:
    started = time.monotonic()
    done = subprocess.run([bf, "apply", "--auto-approve", "-q"], cwd=folder, capture_output=True, env=env)
    seconds = time.monotonic() - started
    if (done.returncode == 0) == expect_failure:
        sys.exit(f"{bf} apply in {folder}: exit {done.returncode}\n{done.stderr.decode()}")
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--verb", choices=["apply", "plan"], default="apply")
    parser.add_argument("builds", nargs="+")
    args = parser.parse_args()
    times = applies(args) if args.verb == "apply" else plans(args)
    for (workload, bf), seconds in times.items():
        print(f"{workload:22s} {bf:40s} median {statistics.median(seconds):.3f} s  min {min(seconds):.3f} s")
    shutil.rmtree(args.work / "scratch", ignore_errors=True)


def applies(args) -> dict:
    scratch = args.work / "scratch"
    times: dict[tuple[str, str], list[float]] = {}
    for variant in ["unpartitioned", "partitioned"]:
        for at, bf in enumerate(args.builds):
            planned(bf, args.work, variant, scratch / f"ab-{variant}-{at}-planned")
        for _ in range(args.runs):
            for at, bf in enumerate(args.builds):
                # The saved plan names its folder's paths: the copy takes the planned folder's name.
                original = scratch / f"ab-{variant}-{at}-planned"
                kept = scratch / f"ab-{variant}-{at}-kept"
                subprocess.run(["cp", "-al", str(original), str(kept)], check=True)
                # A saved plan is applied after its review, long after its rehearsal's files were
                # written; linking them just now set their change times, and bf reads a file ahead of
                # its slice only once that time is a tick of the filesystem's clock old
                # (src/delta/publish/ahead.rs). Not timed.
                time.sleep(SETTLE_S)
                times.setdefault((f"W1 {variant}", bf), []).append(timed_apply(bf, original, rooted(args.work)))
                shutil.rmtree(original)
                kept.rename(original)
    for _ in range(max(args.runs // 2, 1)):
        for bf in args.builds:
            folder = planned(bf, args.work, "unpartitioned", scratch / "ab-w4")
            timed_apply(bf, folder, rooted(args.work, BF_FAULT="after-commit:6"), expect_failure=True)
            times.setdefault(("W4 resumed", bf), []).append(timed_apply(bf, folder, rooted(args.work)))
    return times


if __name__ == "__main__":
    main()

"""W1's floor: the Python loop, `bf plan` and `bf apply --recompute` side by side.

`bf apply --recompute` runs each slice's source query and writes it through deltalake's
replaceWhere, one commit a slice, with no comparison: the loop's own work done by bf's engine. Set
beside the loop, it is the floor of `bf plan` + `bf apply` on that layout (docs/BENCHMARKS.md, "W1
partitioned: bf's write alone against the loop"). Each run starts from fresh hard-linked copies of
the bench table; the three alternate, so a noisy machine slows them alike. Prints medians of wall
and CPU (user + system) time.

    python3 scripts/write-floor.py --work /work/bench-work BF [--layout partitioned] [--runs 5]

`--work` is a `scripts/bench` work folder (its tables and inputs are made by a run of it).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # importing bench.py leaves no __pycache__ in the repository
sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    cpu, started = children_cpu(), time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, env=env)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} in {cwd}: exit {done.returncode}\n{done.stderr.decode()}")
    return seconds, children_cpu() - cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--layout", choices=["partitioned", "unpartitioned"], default="partitioned")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("bf")
    args = parser.parse_args()
    python = os.path.expanduser(os.environ.get("BF_BENCH_VENV", "~/.cache/bf-bench-venv")) + "/bin/python"
    env = dict(os.environ, BF_ROOT=str(args.work))  # the inputs are in the work folder
    source = args.work / f"orders-36m-{args.layout}"
    folder = args.work / "scratch" / f"floor-{args.layout}"
    months = [str(m) for m in range(12, 24)]
    times: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        bench.fresh_copy(source, folder / "loop-table")
        loop = [python, str(Path(__file__).parent / "bench.py"), "_loop", str(folder / "loop-table"), str(args.work / "inputs")]
        times.setdefault("the loop", []).append(timed(loop + months, folder, env))
        bench.fresh_copy(source, folder / "table")
        first, last = bench.month_start(12), bench.month_end(23)
        plan = bench.plan_text(folder / "table", args.work / "inputs", first, last, "month", folder / "rehearsal")
        (folder / "plan.toml").write_text(plan)
        times.setdefault("bf plan", []).append(timed([args.bf, "plan", "plan.toml", "-q"], folder, env))
        recompute = [args.bf, "apply", "--auto-approve", "--recompute", "-q"]
        times.setdefault("bf apply --recompute", []).append(timed(recompute, folder, env))
    shutil.rmtree(folder)
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"W1 {args.layout:13} {name:22} {wall:6.2f} s  {cpu:6.2f} CPU s  (runs: {', '.join(f'{w:.2f}' for w, _ in runs)})")


if __name__ == "__main__":
    main()

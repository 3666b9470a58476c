#!/usr/bin/env python3
"""bf among other writers, on random histories (issue #68).

    BF_BIN=path/to/bf python simulate.py --seeds 0..20 --examples 5
    BF_BIN=path/to/bf python simulate.py --replay found/<name>.json

Each example is one history on a fresh table of a random shape: bf's commands (plan, apply with a
crash at a fault point and its resume, pauses with other writers inside them, --recompute, --rerun,
rollbacks full, --window-only, --force and --to-version, a rollback held at its question while others
work, bf gaps) and other writers between and inside them, each step checked against the model
(history.py, invariants.py). Hypothesis (RuleBasedStateMachine) draws the steps and shrinks a failing
history; the shrunk history is printed as steps and saved to found/ as JSON, which `--replay` runs
again as a regression test.

The binary must be built with the test hooks (BF_FAULT, BF_PAUSE_*): `cargo build --features
test-hooks` (or the test build's target/debug/bf).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ left in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypothesis import HealthCheck, Phase, seed as hyp_seed, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

import history  # noqa: E402
from model import Violation  # noqa: E402
from tables import Shape  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

STATS = collections.Counter()
SHAPES = collections.Counter()
OUTCOMES = collections.Counter()
VERBOSE = False


class Counting(history.Machine):
    def __init__(self):
        super().__init__()
        STATS["histories"] += 1

    def teardown(self):
        if getattr(self.sim, "shape", None) is not None:
            SHAPES[self.sim.shape.name] += 1
        STATS["steps"] += max(0, len(self.sim.steps) - 1)
        STATS["bf runs"] += len(self.sim.bf.runs) if hasattr(self.sim, "bf") else 0
        for run in getattr(getattr(self.sim, "bf", None), "runs", []):
            verb = run.args[0] + (" --window-only" if "--window-only" in run.args else "")
            OUTCOMES[f"{verb}: exit {run.code}"] += 1
        for note in self.sim.noted:
            STATS[f"known: {note['kind']}"] += 1
        super().teardown()


def parse_range(text: str) -> range:
    if ".." in text:
        a, b = text.split("..")
        return range(int(a), int(b))
    return range(int(text), int(text) + 1)


def describe(step: dict) -> str:
    return json.dumps(step, sort_keys=True)


def save(found_dir: str, sim, violation: Violation, seed: int) -> str:
    os.makedirs(found_dir, exist_ok=True)
    body = {
        "violation": {"kind": violation.kind, "detail": violation.detail},
        "seed": seed,
        "shape": sim.steps[0]["shape"],
        "init_seed": sim.steps[0]["seed"],
        "steps": sim.steps[1:],
        # The kinds this run noted and went past: a replay goes past them too, to reach this one.
        "known": sorted(history.KNOWN),
    }
    digest = hashlib.sha256(json.dumps(body["steps"], sort_keys=True).encode()).hexdigest()[:8]
    path = os.path.join(found_dir, f"{violation.kind}-{digest}.json")
    with open(path, "w") as f:
        json.dump(body, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def run_seed(s: int, args) -> dict | None:
    phases = [Phase.explicit, Phase.generate] + ([] if args.no_shrink else [Phase.shrink])
    config = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=phases,
        print_blob=False,
    )

    def factory():
        return Counting()

    hyp_seed(s)(factory)
    try:
        run_state_machine_as_test(factory, settings=config)
        return None
    except Violation as v:
        sim = history.LAST["sim"]
        path = save(args.found, sim, v, s)
        print(f"\nseed {s}: VIOLATION [{v.kind}]\n{v.detail}\nshrunk history ({len(sim.steps) - 1} steps after "
              f"init), saved to {os.path.relpath(path)}:")
        print("  init " + json.dumps(sim.steps[0]))
        for i, step in enumerate(sim.steps[1:], 1):
            print(f"  {i}. {describe(step)}")
        return {"seed": s, "kind": v.kind, "file": os.path.relpath(path, HERE), "steps": len(sim.steps) - 1,
                "detail": v.detail[:1500]}
    except Exception as error:  # the harness's own failure: say so, never count it as bf's
        traceback.print_exc()
        return {"seed": s, "kind": "harness-error", "detail": f"{type(error).__name__}: {error}"[:1500]}


def replay(path: str, args) -> int:
    with open(path) as f:
        body = json.load(f)
    sim = history.Sim(history.BINARY, set(args.known) | set(body.get("known", [])))
    sim.keep = args.keep
    try:
        sim.init(Shape(**body["shape"]), body["init_seed"])
        sim.check()
        for i, step in enumerate(body["steps"], 1):
            print(f"  {i}. {describe(step)}", flush=True)
            sim.execute(step)
            sim.check()
    except Violation as v:
        print(f"REPRODUCED [{v.kind}] (saved as [{body['violation']['kind']}])\n{v.detail}")
        return 1
    finally:
        if args.keep:
            print(f"(the history's folder is kept: {sim.work})")
        sim.close()
    print(f"passes: the history of {os.path.basename(path)} no longer breaks an invariant "
          f"(it found [{body['violation']['kind']}])")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bf", default=os.environ.get("BF_BIN"), help="the bf binary (or BF_BIN), built with test hooks")
    p.add_argument("--seeds", default="0..1", help="A..B: one Hypothesis run per seed in [A, B)")
    p.add_argument("--examples", type=int, default=5, help="histories per seed")
    p.add_argument("--steps", type=int, default=12, help="the most steps a history takes")
    p.add_argument("--replay", nargs="*", help="run saved histories again (found/*.json)")
    p.add_argument("--known", default="", help="violation kinds to note and move past (comma-separated)")
    p.add_argument("--found", default=os.path.join(HERE, "found"), help="where shrunk histories are saved")
    p.add_argument("--summary", help="write the run's summary (JSON) here")
    p.add_argument("--jobs", type=int, default=1,
                   help="run the seeds in this many processes at once (one per core)")
    p.add_argument("--share", default="0/1", help=argparse.SUPPRESS)  # a --jobs worker's part: I/N
    p.add_argument("--budget", type=float, default=0, help="start no new seed after this many seconds")
    p.add_argument("--no-shrink", action="store_true", help="report a failing history unshrunk")
    p.add_argument("--shrink-seconds", type=float, default=300,
                   help="the most time shrinking one failing history takes (Hypothesis's own cap: 300)")
    p.add_argument("--keep", action="store_true", help="keep a replayed history's folder")
    p.add_argument("-v", "--verbose", action="store_true", help="print every step and bf's answers")
    args = p.parse_args()
    if not args.bf or not os.access(args.bf, os.X_OK):
        p.error("the bf binary: --bf PATH or BF_BIN (built with the test hooks)")
    os.environ["BF_BIN"] = os.path.abspath(args.bf)
    history.BINARY = os.path.abspath(args.bf)
    args.known = [k for k in args.known.split(",") if k]
    history.VERBOSE = args.verbose
    try:  # Hypothesis's cap on shrinking, an internal constant: lowered where it exists
        from hypothesis.internal.conjecture import engine

        engine.MAX_SHRINKING_SECONDS = args.shrink_seconds
    except (ImportError, AttributeError):
        pass
    history.KNOWN.update(args.known)
    if args.replay is not None:
        return max([replay(path, args) for path in args.replay] or [0])
    if args.jobs > 1:
        return report(in_parallel(args), args.summary)
    worker, workers = (int(n) for n in args.share.split("/"))
    seeds = [s for s in parse_range(args.seeds) if s % workers == worker]
    summary = run_seeds(seeds, args)
    if workers > 1:  # a --jobs worker: the parent prints the whole run's summary
        write(summary, args.summary)
        return verdict(summary)
    return report(summary, args.summary)


def run_seeds(seeds: list[int], args) -> dict:
    """Runs each seed's histories in turn (no new seed once the budget is spent): the summary."""
    started = time.monotonic()
    found = []
    ran = []
    for s in seeds:
        if args.budget and time.monotonic() - started > args.budget:
            print(f"budget spent: stopped before seed {s}")
            break
        t0 = time.monotonic()
        result = run_seed(s, args)
        ran.append(s)
        print(f"seed {s}: {'ok' if result is None else result['kind']} ({time.monotonic() - t0:.0f} s; "
              f"{STATS['histories']} histories, {STATS['steps']} steps so far)", flush=True)
        if result:
            found.append(result)
    return {
        "bf": os.environ["BF_BIN"],
        "seeds": spans(ran),
        "examples_per_seed": args.examples,
        "max_steps": args.steps,
        "seconds": round(time.monotonic() - started),
        "histories_run": STATS["histories"],
        "steps_run": STATS["steps"],
        "bf_runs": STATS["bf runs"],
        "shapes": dict(SHAPES.most_common()),
        "bf_outcomes": dict(sorted(OUTCOMES.items())),
        "known_noted": {k[7:]: n for k, n in STATS.items() if k.startswith("known: ")},
        "violations": found,
    }


def spans(seeds: list[int]) -> list[list[int]]:
    """The seeds run as half-open ranges: [[0, 40]] for 0..40, more where a budget cut a worker short."""
    out: list[list[int]] = []
    for s in sorted(seeds):
        if out and out[-1][1] == s:
            out[-1][1] = s + 1
        else:
            out.append([s, s + 1])
    return out


def in_parallel(args) -> dict:
    """`--jobs N`: N processes of this script, worker i running the seeds s with s % N == i (so a
    seed's histories are the same however many jobs run them), their lines passed on prefixed with
    the worker, their summaries added up."""
    folder = tempfile.mkdtemp(prefix="bf-sim-jobs-")
    started = time.monotonic()
    workers = []
    for i in range(args.jobs):
        summary = os.path.join(folder, f"summary-{i}.json")
        command = [sys.executable, "-u", os.path.abspath(__file__), "--bf", os.environ["BF_BIN"],
                   "--seeds", args.seeds, "--share", f"{i}/{args.jobs}", "--examples", str(args.examples),
                   "--steps", str(args.steps), "--known", ",".join(args.known), "--found", args.found,
                   "--budget", str(args.budget), "--shrink-seconds", str(args.shrink_seconds),
                   "--summary", summary]
        command += ["--no-shrink"] * args.no_shrink + ["-v"] * args.verbose
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        relay = threading.Thread(target=prefix_lines, args=(child.stdout, f"[{i + 1}/{args.jobs}] "))
        relay.start()
        workers.append((child, relay, summary))
    parts = []
    for i, (child, relay, summary) in enumerate(workers):
        child.wait()
        relay.join()
        if not os.path.exists(summary):
            parts.append({"violations": [{"seed": None, "kind": "harness-error",
                                          "detail": f"worker {i + 1} exited {child.returncode} without a summary"}]})
            continue
        with open(summary) as f:
            parts.append(json.load(f))
    shutil.rmtree(folder, ignore_errors=True)
    return merged(parts, time.monotonic() - started, args)


def prefix_lines(stream, prefix: str) -> None:
    for line in stream:
        sys.stdout.write(prefix + line)
        sys.stdout.flush()


def merged(parts: list[dict], seconds: float, args) -> dict:
    """The workers' summaries as one: counts added, seeds joined, the wall time of the whole run."""
    def added(key: str) -> dict:
        total = collections.Counter()
        for part in parts:
            total.update(part.get(key, {}))
        return dict(total.most_common()) if key == "shapes" else dict(sorted(total.items()))

    return {
        "bf": os.environ["BF_BIN"],
        "jobs": args.jobs,
        "seeds": spans([s for part in parts for a, b in part.get("seeds", []) for s in range(a, b)]),
        "examples_per_seed": args.examples,
        "max_steps": args.steps,
        "seconds": round(seconds),
        "histories_run": sum(part.get("histories_run", 0) for part in parts),
        "steps_run": sum(part.get("steps_run", 0) for part in parts),
        "bf_runs": sum(part.get("bf_runs", 0) for part in parts),
        "shapes": added("shapes"),
        "bf_outcomes": added("bf_outcomes"),
        "known_noted": added("known_noted"),
        "violations": [v for part in parts for v in part.get("violations", [])],
    }


def report(summary: dict, path: str | None) -> int:
    """Prints the summary (and writes it to `path`); the exit status."""
    found = summary["violations"]
    seeds = sum(b - a for a, b in summary["seeds"])
    print("\n== summary ==")
    print(f"{seeds} seeds, {summary['histories_run']} histories (shrinking's reruns included), "
          f"{summary['steps_run']} steps, {summary['bf_runs']} bf runs in {summary['seconds']} s")
    print("shapes: " + ", ".join(f"{k} ×{n}" for k, n in summary["shapes"].items()))
    print("bf outcomes: " + ", ".join(f"{k} ×{n}" for k, n in summary["bf_outcomes"].items()))
    kinds = collections.Counter(v["kind"] for v in found)
    print(f"violations: {sum(kinds.values())}" + "".join(f"\n  {k}: {n}" for k, n in kinds.items()))
    for v in found:
        if v.get("file"):
            print(f"  seed {v['seed']}: [{v['kind']}] {v['file']} ({v['steps']} steps)")
    if path:
        write(summary, path)
    return verdict(summary)


def write(summary: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


def verdict(summary: dict) -> int:
    """The exit status: 1 for a violation, 2 for only the harness's own errors, 0 for none."""
    found = summary["violations"]
    return 1 if any(v["kind"] != "harness-error" for v in found) else (2 if found else 0)

if __name__ == "__main__":
    sys.exit(main())

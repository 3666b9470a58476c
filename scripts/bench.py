"""bf against what a user would pick instead, side by side in one run.

Workloads (docs/BENCHMARKS.md says why each):
  W1 apply   an orders table of --months months (unpartitioned, and partitioned by day); backfill
             --slices monthly slices of --rows-per-month rows each from Parquet inputs.
  W2 plan    a one-month plan (replace, then merge) on the whole table vs the same plan on a table
             holding only that month;
             and the shallow clone of a table of --clone-files files, at two data sizes.
  W3 memory  one slice of --w3-rows rows: peak RSS.
  W4 resume  apply killed after half the slices, then resumed.
  W5 daily   a table of 2025 (--w5-rows-per-day orders a day, 12 monthly appends), every day reloaded
             from its own Parquet file in one-day slices: --w5-slices slices (30, 90, 365), bf plan
             and bf apply against the loop, per slice: the fixed cost of a slice.
  W6 cluster one slice of --w6-rows rows whose source joins the orders with exchange rates and
             aggregates them by customer and day (a table of --w6-rows / 16 rows), planned and applied (`--recompute`) in bf's process
             and on a Ballista cluster on this machine (`bf cluster`: a scheduler, two workers):
             wall time, bf's peak RSS, the workers' peak RSS and the bytes they kept (shuffle and
             results). Needs a bf built with `--features cluster` (scripts/bench builds one).
  S3         W1 with the table and the inputs in a bucket of an S3 server on 127.0.0.1 (moto),
             bf against the Python loop on the same server, with the server's CPU time in each;
             what one request of each kind costs the server; and the shallow clone of the
             --clone-files table there.

Contenders, each a child process so each has its own wall time, peak RSS and CPU time (GNU time):
  bf         the binary given by --bf (`bf plan`, `bf apply`);
  loop       the Python deltalake loop of the seed: per month, read its input and
             write_deltalake(mode="overwrite", predicate=...) on one DeltaTable opened once;
  limit      the same query written as plain Parquet by DataFusion (no Delta log, no replaceWhere),
             in the table's layout; in W1 also pinned to one core (taskset);
  cp -r      for the clone: a deep copy.

Runs alternate the contenders (the order rotates each run) on fresh hard-linked copies of the
generated tables (Delta never rewrites a file in place), and report medians and ratios.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERY = "SELECT order_id, customer, sku, quantity, amount, currency, order_date FROM orders"
FIRST_MONTH = dt.date(2023, 1, 1)


# ----------------------------------------------------------------------------------------------
# Workload generation: deterministic (numpy's PCG64 seeded per month), sizes from the flags.


def month_start(index: int) -> dt.date:
    year, month = divmod(FIRST_MONTH.month - 1 + index, 12)
    return dt.date(FIRST_MONTH.year + year, month + 1, 1)


def month_end(index: int) -> dt.date:
    return month_start(index + 1) - dt.timedelta(days=1)


def orders(seed: int, index: int, rows: int, first_id: int, corrected: bool, days: int | None = None):
    """One month of orders; `corrected` is the same orders with the amounts a backfill fixes."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([seed, index])
    start = month_start(index)
    days = days or (month_end(index) - start).days + 1
    day = rng.integers(0, days, rows)
    customers = pa.array([f"C{i:05d}" for i in range(20_000)])
    skus = pa.array([f"SKU-{i:04d}" for i in range(2_000)])
    currencies = pa.array(["EUR", "USD", "GBP", "CHF"])
    amount = rng.integers(100, 50_000, rows) / 100.0
    if corrected:
        amount = np.round(amount * 1.1, 2)
    dates = (np.datetime64(start.isoformat(), "D") + day.astype("timedelta64[D]")).astype("datetime64[D]")
    return pa.table(
        {
            "order_id": pa.array(np.arange(first_id, first_id + rows, dtype=np.int64)),
            "customer": customers.take(pa.array(rng.integers(0, len(customers), rows))),
            "sku": skus.take(pa.array(rng.integers(0, len(skus), rows))),
            "quantity": pa.array(rng.integers(1, 6, rows).astype(np.int32)),
            "amount": pa.array(amount),
            "currency": currencies.take(pa.array(rng.integers(0, len(currencies), rows))),
            "order_date": pa.array(dates, type=pa.date32()),
        }
    )


def make_table(path: Path, seed: int, months: range, rows: int, partitioned: bool):
    """The orders table; made once per work folder, then shared by the workloads that need it."""
    from deltalake import write_deltalake

    if path.exists():
        return
    for index in months:
        data = orders(seed, index, rows, first_id=index * rows, corrected=False)
        write_deltalake(str(path), data, mode="append", partition_by=["order_date"] if partitioned else None)


def daily_orders(seed: int, index: int, rows_per_day: int, corrected: bool):
    """A month of about `rows_per_day` orders a day, ids unique across the months of the workload."""
    days = (month_end(index) - month_start(index)).days + 1
    return orders(seed, index, rows_per_day * days, first_id=index * 1_000_000, corrected=corrected)


def make_daily_table(path: Path, seed: int, months: range, rows_per_day: int):
    from deltalake import write_deltalake

    if path.exists():
        return
    for index in months:
        write_deltalake(str(path), daily_orders(seed, index, rows_per_day, corrected=False), mode="append")


def make_daily_inputs(folder: Path, seed: int, months: range, rows_per_day: int):
    """One Parquet file per day: the corrected orders of that day."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for index in months:
        data = daily_orders(seed, index, rows_per_day, corrected=True)
        day = month_start(index)
        while day <= month_end(index):
            file = folder / f"orders_{day}.parquet"
            if not file.exists():
                pq.write_table(data.filter(pc.equal(data["order_date"], pa_date(day))), file)
            day += dt.timedelta(days=1)


def pa_date(day: dt.date):
    import pyarrow as pa

    return pa.scalar(day, type=pa.date32())


def make_inputs(folder: Path, seed: int, months: range, rows: int):
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for index in months:
        file = folder / f"orders_{month_start(index)}.parquet"
        if not file.exists():
            pq.write_table(orders(seed, index, rows, first_id=index * rows, corrected=True), file)


def make_many_files(path: Path, files: int, rows_per_file: int):
    """A table of `files` files, one per day partition, in one commit."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    if path.exists():
        return
    n = files * rows_per_file
    day = np.repeat(np.arange(files), rows_per_file)
    data = pa.table(
        {
            "order_id": pa.array(np.arange(n, dtype=np.int64)),
            "customer": pa.array(["C00001"] * n),
            "sku": pa.array(["SKU-0001"] * n),
            "quantity": pa.array(np.ones(n, dtype=np.int32)),
            "amount": pa.array(np.full(n, 9.99)),
            "currency": pa.array(["EUR"] * n),
            "order_date": pa.array(
                np.datetime64("2000-01-01", "D") + day.astype("timedelta64[D]"), type=pa.date32()
            ),
        }
    )
    write_deltalake(str(path), data, partition_by=["order_date"])


def plan_text(table: Path, inputs: Path, first: dt.date, last: dt.date, every: str, rehearsal: Path, mode: str = "replace") -> str:
    return f'''reason = "Benchmark: reload {first}..{last} from corrected files."

[target]
table = "{table}"
date_column = "order_date"
key = ["order_id"]

[window]
start = {first}
end = {last}

[slicing]
every = "{every}"

[source]
inputs.orders = {{ path = "{inputs}/orders_{{start}}.parquet", format = "parquet" }}
query = "{QUERY}"

[[metrics]]
name = "revenue"
sql = "SUM(amount)"

[guards]
max_slices = 1000

[write]
mode = "{mode}"

[rehearsal]
table = "{rehearsal}"
'''


# ----------------------------------------------------------------------------------------------
# The baselines, run as children of this script (`bench.py _loop …`, `bench.py _limit …`).


def python_loop(table: str, inputs: str, months: list[int]):
    """What the seed's loop does with the deltalake package, table opened once (the faster way)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    target = DeltaTable(table, storage_options=s3_options(table))
    filesystem = None
    if inputs.startswith("s3://"):
        from pyarrow import fs

        endpoint = os.environ["AWS_ENDPOINT_URL"]
        filesystem = fs.S3FileSystem(
            endpoint_override=endpoint.split("://")[1],
            scheme="http",
            access_key=os.environ["AWS_ACCESS_KEY_ID"],
            secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            region=os.environ["AWS_REGION"],
        )
        inputs = inputs.removeprefix("s3://")
    for index in months:
        first, last = month_start(index), month_end(index)
        data = pq.read_table(f"{inputs}/orders_{first}.parquet", filesystem=filesystem)
        predicate = f"order_date >= '{first}' AND order_date <= '{last}'"
        write_deltalake(target, data, mode="overwrite", predicate=predicate)
        print(f"Backfilled {first} to {last}")


def daily_loop(table: str, inputs: str, first: dt.date, last: dt.date):
    """The loop of the September scenario: per day, read its file and replace the day."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    target = DeltaTable(table)
    day = first
    while day <= last:
        data = pq.read_table(f"{inputs}/orders_{day}.parquet")
        write_deltalake(target, data, mode="overwrite", predicate=f"order_date = '{day}'")
        day += dt.timedelta(days=1)


def parquet_limit(inputs: str, out: str, months: list[int], partitioned: bool = False):
    """The same query, written as plain Parquet by DataFusion: no log, no replaceWhere, no checks.
    `partitioned` writes the files a table partitioned by day holds: one folder per day."""
    from datafusion import DataFrameWriteOptions, SessionContext

    options = DataFrameWriteOptions(partition_by=["order_date"]) if partitioned else None
    for index in months:
        first = month_start(index)
        ctx = SessionContext()
        ctx.register_parquet("orders", f"{inputs}/orders_{first}.parquet")
        ctx.sql(QUERY).write_parquet(f"{out}/{first}", write_options=options)


# ----------------------------------------------------------------------------------------------
# Measuring.


class Measured:
    def __init__(self, seconds: float, peak_rss_mb: float, stdout: str, cpu_seconds: float | None = None):
        self.seconds, self.peak_rss_mb, self.stdout = seconds, peak_rss_mb, stdout
        # User + system CPU time (over `seconds`: how many cores the child kept busy); None for a
        # figure that is not one child's run, such as the clone's own timer.
        self.cpu_seconds = cpu_seconds


def measure(argv: list[str], cwd: Path, env: dict | None = None, expect_failure: bool = False) -> Measured:
    """Runs one child: wall time around it, its own peak RSS and CPU time from GNU time. (A child forked from
    this script would count this script's memory in its peak: Linux carries the high-water mark
    across fork, and `time` is a small process to fork from.)"""
    rss = tempfile.NamedTemporaryFile()
    started = time.perf_counter()
    child = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", "-o", rss.name, *map(str, argv)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    seconds = time.perf_counter() - started
    if (child.returncode != 0) != expect_failure:
        sys.exit(f"{' '.join(map(str, argv))} exited {child.returncode} in {cwd}:\n{child.stdout}\n{child.stderr}")
    peak_kib, user, system = Path(rss.name).read_text().splitlines()[-1].split()
    return Measured(seconds, int(peak_kib) / 1024, child.stdout, float(user) + float(system))


def plan_and_apply(args, scratch: Path, results: Results, name: str, mark=lambda label: None):
    """`bf plan` then `bf apply` of scratch/plan.toml, recorded alone and together. `mark` is called
    before each command and after the last (the S3 workload marks its server's request log)."""
    mark("plan")
    planned = measure([args.bf, "plan", "plan.toml", "-q"], scratch)
    # Where the plan's time went, as bf timed its steps (the saved plan's `timings`).
    saved = json.loads((scratch / ".bf" / "plan.json").read_text())
    for step, millis in saved.get("timings", {}).items():
        if step != "total":
            results.add(name, f"  bf plan: {step}", Measured(millis / 1000, 0, ""))
    mark("apply")
    applied = measure([args.bf, "apply", "--auto-approve", "-q"], scratch)
    mark("end")
    results.add(name, "bf apply", applied)
    results.add(name, "bf plan", planned)
    both = Measured(
        planned.seconds + applied.seconds,
        max(planned.peak_rss_mb, applied.peak_rss_mb),
        "",
        planned.cpu_seconds + applied.cpu_seconds,
    )
    results.add(name, "bf plan + apply", both)


def planned_copy(base: Path, scratch: Path, inputs: Path, first: dt.date, last: dt.date) -> Path:
    """A fresh copy of a bench table in scratch/table, and scratch/plan.toml backfilling its window by month."""
    table = fresh_copy(base, scratch / "table")
    (scratch / "plan.toml").write_text(plan_text(table, inputs, first, last, "month", scratch / "rehearsal"))
    return table


def fresh_copy(table: Path, to: Path) -> Path:
    """A hard-linked copy: instant, and safe since Delta writers only add files."""
    if to.exists():
        shutil.rmtree(to)
    subprocess.run(["cp", "-al", str(table), str(to)], check=True)
    return to


class Results:
    def __init__(self):
        self.samples: dict[str, dict[str, list[Measured]]] = {}

    def add(self, workload: str, contender: str, measured: Measured):
        self.samples.setdefault(workload, {}).setdefault(contender, []).append(measured)

    def median(self, workload: str, contender: str) -> float:
        return statistics.median(m.seconds for m in self.samples[workload][contender])

    def summary(self) -> dict:
        return {
            workload: {
                contender: {
                    "runs": len(runs),
                    "median_s": round(statistics.median(m.seconds for m in runs), 3),
                    "min_s": round(min(m.seconds for m in runs), 3),
                    "max_s": round(max(m.seconds for m in runs), 3),
                    "peak_rss_mb": round(max(m.peak_rss_mb for m in runs), 1),
                    "cpu_s": None
                    if any(m.cpu_seconds is None for m in runs)
                    else round(statistics.median(m.cpu_seconds for m in runs), 3),
                }
                for contender, runs in contenders.items()
            }
            for workload, contenders in self.samples.items()
        }


def fresh_scratch(work: Path) -> Path:
    """An empty folder for one contender's run: its copy of the table, plan, rehearsal, output."""
    scratch = work / "scratch"
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir()
    return scratch


def rotate(items: list, run: int) -> list:
    return items[run % len(items):] + items[: run % len(items)]


def this_script(*args) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *map(str, args)]


def delta_rows(table: Path | str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(table), storage_options=s3_options(str(table))).to_pyarrow_dataset().count_rows()


def s3_options(location: str) -> dict | None:
    """The Python package's options for a table in the bench's S3 server (from the environment)."""
    if not location.startswith("s3://"):
        return None
    return {k: v for k, v in os.environ.items() if k.startswith("AWS_")}


# ----------------------------------------------------------------------------------------------
# The workloads.


def w1_apply(args, work: Path, results: Results, ratios: dict):
    window = range(args.window_first, args.window_first + args.slices)
    inputs = work / "inputs"
    make_inputs(inputs, args.seed, window, args.rows_per_month)
    for variant in ["unpartitioned", "partitioned"]:
        base = work / f"orders-{args.months}m-{variant}"
        make_table(base, args.seed, range(args.months), args.rows_per_month, variant == "partitioned")
        name = f"W1 apply, {variant}"
        first, last = month_start(window.start), month_end(window.stop - 1)
        for run in range(args.runs):
            for contender in rotate(["bf", "bf write alone", "loop", "limit", "limit, one core"], run):
                scratch = fresh_scratch(work)
                if contender == "bf":
                    table = planned_copy(base, scratch, inputs, first, last)
                    plan_and_apply(args, scratch, results, name)
                    if run == 0:
                        check_rows(table, args.months * args.rows_per_month, "bf apply")
                elif contender == "bf write alone":
                    # `bf apply --recompute` after an untimed plan: each slice's query written through
                    # deltalake's replaceWhere, nothing compared or published. The loop's own work done
                    # by bf's engine, so the floor under `bf plan` + `bf apply` on this layout.
                    table = planned_copy(base, scratch, inputs, first, last)
                    measure([args.bf, "plan", "plan.toml", "-q"], scratch)
                    recompute = [args.bf, "apply", "--auto-approve", "--recompute", "-q"]
                    results.add(name, "bf write alone", measure(recompute, scratch))
                    if run == 0:
                        check_rows(table, args.months * args.rows_per_month, "bf apply --recompute")
                elif contender == "loop":
                    table = fresh_copy(base, scratch / "table")
                    results.add(name, "loop", measure(this_script("_loop", table, inputs, *window), scratch))
                    if run == 0:
                        check_rows(table, args.months * args.rows_per_month, "the loop")
                else:
                    # The limit writes the files the table's layout needs; "one core" is the same
                    # run pinned to one CPU, as deltalake's writer of an unpartitioned table is.
                    limit = this_script("_limit", inputs, scratch / "out", variant, *window)
                    pin = ["taskset", "-c", "0"] if contender == "limit, one core" else []
                    results.add(name, contender, measure(pin + limit, scratch))
        loop, limit = results.median(name, "loop"), results.median(name, "limit")
        ratios[name] = {
            "bf apply / loop": results.median(name, "bf apply") / loop,
            "bf apply / limit": results.median(name, "bf apply") / limit,
            "bf plan + apply / loop": results.median(name, "bf plan + apply") / loop,
            "bf write alone / loop": results.median(name, "bf write alone") / loop,
            # bf's own share: what the rehearsal, the comparison and publishing cost over the write.
            "bf plan + apply / bf write alone": results.median(name, "bf plan + apply")
            / results.median(name, "bf write alone"),
            "loop / limit": loop / limit,
            "bf apply / limit on one core": results.median(name, "bf apply") / results.median(name, "limit, one core"),
        }


def w2_plan(args, work: Path, results: Results, ratios: dict):
    month = args.window_first
    inputs = work / "inputs"
    make_inputs(inputs, args.seed, range(month, month + 1), args.rows_per_month)
    whole = work / f"orders-{args.months}m-unpartitioned"
    make_table(whole, args.seed, range(args.months), args.rows_per_month, partitioned=False)
    alone = work / "w2-one-month"
    make_table(alone, args.seed, range(month, month + 1), args.rows_per_month, partitioned=False)
    # Replace and merge plans alike: a merge rehearsal copies only the window's files too.
    for mode, name in [("replace", "W2 one-month plan"), ("merge", "W2 one-month merge plan")]:
        for run in range(args.runs):
            for label, base in rotate([(f"bf plan on {args.months} months", whole), ("bf plan on 1 month", alone)], run):
                scratch = fresh_scratch(work)
                (scratch / "plan.toml").write_text(
                    plan_text(base, inputs, month_start(month), month_end(month), "month", scratch / "rehearsal", mode)
                )
                results.add(name, label, measure([args.bf, "plan", "plan.toml", "-q"], scratch))
        ratios[name] = {
            f"{args.months} months / 1 month": results.median(name, f"bf plan on {args.months} months")
            / results.median(name, "bf plan on 1 month")
        }

    # The clone alone: a one-day plan on tables of --clone-files files, small and ten times larger.
    name = f"W2 clone of {args.clone_files} files"
    clone_ms: dict[str, list[float]] = {}
    for size, rows_per_file in [("small", 1), ("10x rows", 10)]:
        base = work / f"w2-files-{size}"
        make_many_files(base, args.clone_files, rows_per_file)
        last_day = dt.date(2000, 1, 1) + dt.timedelta(days=args.clone_files - 1)
        day_inputs = work / f"w2-day-{size}"
        day_inputs.mkdir(exist_ok=True)
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
        from deltalake import DeltaTable

        day_rows = DeltaTable(str(base)).to_pyarrow_dataset().to_table(filter=ds.field("order_date") == last_day)
        pq.write_table(day_rows, day_inputs / f"orders_{last_day}.parquet")
        for run in range(args.runs):
            for contender in rotate(["bf", "cp"], run):
                scratch = fresh_scratch(work)
                if contender == "bf":
                    (scratch / "plan.toml").write_text(
                        plan_text(base, day_inputs, last_day, last_day, "day", scratch / "rehearsal")
                    )
                    planned = measure([args.bf, "plan", "plan.toml", "-q"], scratch)
                    saved = json.loads((scratch / ".bf/plan.json").read_text())
                    clone = saved["rehearsal"]["clone"]
                    assert clone["files_referenced"] == args.clone_files, clone
                    clone_ms.setdefault(size, []).append(clone["millis"])
                    results.add(name, f"bf clone, {size}", Measured(clone["millis"] / 1000, planned.peak_rss_mb, ""))
                    results.add(name, f"bf plan (one day), {size}", planned)
                else:
                    results.add(name, f"cp -r, {size}", measure(["cp", "-r", str(base), str(scratch / "copy")], scratch))
    ratios[name] = {
        "bf clone 10x rows / small": statistics.median(clone_ms["10x rows"]) / statistics.median(clone_ms["small"]),
        "bf clone / cp -r (10x rows)": results.median(name, "bf clone, 10x rows") / results.median(name, "cp -r, 10x rows"),
    }


def w3_memory(args, work: Path, results: Results, ratios: dict):
    month = 0
    inputs = work / "w3-inputs"
    make_inputs(inputs, args.seed, range(month, month + 1), args.w3_rows)
    base = work / "w3-table"
    make_table(base, args.seed, range(month, month + 1), args.w3_rows, partitioned=False)
    name = f"W3 one slice of {args.w3_rows:,} rows"
    for run in range(max(1, min(args.runs, 3))):
        for contender in rotate(["bf", "bounded", "loop", "limit"], run):
            scratch = fresh_scratch(work)
            if contender in ("bf", "bounded"):
                # `bounded`: the same with the operator's memory bound (BF_MEMORY_LIMIT), which bf's
                # queries spill to disk beyond.
                env, label = ({"BF_MEMORY_LIMIT": args.w3_memory_limit}, f" (BF_MEMORY_LIMIT={args.w3_memory_limit})") if contender == "bounded" else ({}, "")
                table = fresh_copy(base, scratch / "table")
                (scratch / "plan.toml").write_text(
                    plan_text(table, inputs, month_start(month), month_end(month), "month", scratch / "rehearsal")
                )
                results.add(name, "bf plan" + label, measure([args.bf, "plan", "plan.toml", "-q"], scratch, env))
                results.add(name, "bf apply" + label, measure([args.bf, "apply", "--auto-approve", "-q"], scratch, env))
                if run == 0:
                    check_rows(table, args.w3_rows, contender)
            elif contender == "loop":
                table = fresh_copy(base, scratch / "table")
                results.add(name, "loop", measure(this_script("_loop", table, inputs, month), scratch))
            else:
                results.add(name, "limit", measure(this_script("_limit", inputs, scratch / "out", "unpartitioned", month), scratch))
    peak = {c: max(m.peak_rss_mb for m in runs) for c, runs in results.samples[name].items()}
    bounded = f" (BF_MEMORY_LIMIT={args.w3_memory_limit})"
    ratios[name] = {
        "bf apply peak RSS / loop": peak["bf apply"] / peak["loop"],
        "bf plan peak RSS / loop": peak["bf plan"] / peak["loop"],
        "bf apply peak RSS MiB": peak["bf apply"],
        "bf plan peak RSS MiB": peak["bf plan"],
        "bounded bf plan peak RSS MiB": peak["bf plan" + bounded],
        "bounded bf apply peak RSS MiB": peak["bf apply" + bounded],
        "bounded bf plan s / bf plan s": results.median(name, "bf plan" + bounded) / results.median(name, "bf plan"),
    }


def w4_resume(args, work: Path, results: Results, ratios: dict):
    window = range(args.window_first, args.window_first + args.slices)
    inputs = work / "inputs"
    make_inputs(inputs, args.seed, window, args.rows_per_month)
    base = work / f"orders-{args.months}m-unpartitioned"
    make_table(base, args.seed, range(args.months), args.rows_per_month, partitioned=False)
    half = args.slices // 2
    name = f"W4 resume after slice {half} of {args.slices}"
    first, last = month_start(window.start), month_end(window.stop - 1)
    for run in range(args.runs):
        for contender in rotate(["full", "resumed"], run):
            scratch = fresh_scratch(work)
            planned_copy(base, scratch, inputs, first, last)
            measure([args.bf, "plan", "plan.toml", "-q"], scratch)
            apply = [args.bf, "apply", "--auto-approve", "-q"]
            if contender == "full":
                results.add(name, "bf apply, all slices", measure(apply, scratch))
                continue
            measure(apply, scratch, env={"BF_FAULT": f"after-commit:{half}"}, expect_failure=True)
            resumed = measure(apply, scratch)
            rest = args.slices - half
            done = f"{rest} slice{'s' if rest != 1 else ''} committed"
            if done not in resumed.stdout or f"{half} already there" not in resumed.stdout:
                sys.exit(f"the resumed apply did not do only slices {half + 1}..{args.slices}:\n{resumed.stdout}")
            results.add(name, f"bf apply, resumed (slices {half + 1}-{args.slices})", resumed)
    share = results.median(name, "bf apply, all slices") * (args.slices - half) / args.slices
    ratios[name] = {
        "resumed / its share of a full run": results.median(name, f"bf apply, resumed (slices {half + 1}-{args.slices})")
        / share
    }


# ----------------------------------------------------------------------------------------------
# On an S3 server: moto on a free loopback port, started and stopped by this script.


class S3Server:
    def __init__(self, work: Path):
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        moto = Path(sys.executable).parent / "moto_server"
        # moto's request log (werkzeug's, one line a request), for --s3-requests.
        self.log = work / "moto-requests.log"
        self.log_file = self.log.open("w")
        self.process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
            cwd=work,
            stdout=self.log_file,
            stderr=self.log_file,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    sys.exit("the S3 server (moto) did not start")
                time.sleep(0.1)
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
            "AWS_CONDITIONAL_PUT": "etag",
        }
        os.environ.update(self.env)
        import boto3

        self.s3 = boto3.client("s3")
        self.s3.create_bucket(Bucket="bench")

    def cpu_seconds(self) -> float:
        """The server's CPU time so far (user + system, all its threads): moto answers in Python,
        one request at a time under the interpreter's lock, and this is what bf's and the loop's
        requests cost it."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def mark(self, label: str):
        """A request whose key names `label`: where a phase starts in the request log."""
        self.s3.list_objects_v2(Bucket="bench", Prefix=f"__mark__/{label}", MaxKeys=1)

    def requests(self, tables: list[str]) -> dict:
        """The requests since the last `start` mark, counted by phase (the command between two
        marks: bf's plan or apply, the loop), operation and what they reach: the log or data files
        of one of `tables` or of its rehearsal, the inputs."""
        import re
        import urllib.parse

        counts, phase = {}, None
        for line in self.log.read_text().splitlines():
            # werkzeug colours some lines (a 206, a ranged read): its escapes go first.
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            m = re.search(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d+)', line)
            if not m:
                continue
            method, target, status = m.groups()
            path, _, query = target.partition("?")
            params = urllib.parse.parse_qs(query)
            key = urllib.parse.unquote(path.removeprefix("/bench").lstrip("/"))
            prefix = params.get("prefix", [""])[0]
            if prefix.startswith("__mark__/"):
                label = prefix.removeprefix("__mark__/")
                phase = None if label in ("start", "end") else label if label == "loop" else f"bf {label}"
                if label == "start":
                    counts = {}  # the log holds earlier runs' marks too: the last run is this one
                continue
            if phase is None:
                continue
            what = key or prefix
            area = (
                "rehearsal" if any(what.startswith(f"{t}-rehearsal") for t in tables)
                else "table" if any(what.startswith(t) for t in tables)
                else "inputs" if what.startswith("inputs")
                else "other"
            )
            part = "log" if "_delta_log" in what else "data"
            op = (
                "LIST" if "list-type" in params
                else "GET range" if status == "206"
                else f"{method} multipart" if "uploadId" in params or "uploads" in query
                else method
            )
            row = f"{phase:9} {op:14} {area:9} {part:4}"
            counts[row] = counts.get(row, 0) + 1
        return dict(sorted(counts.items()))

    def stop(self):
        self.process.terminate()
        self.process.wait()
        self.log_file.close()

    def upload(self, folder: Path, prefix: str):
        from concurrent.futures import ThreadPoolExecutor

        files = [f for f in folder.rglob("*") if f.is_file()]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda f: self.s3.upload_file(str(f), "bench", f"{prefix}/{f.relative_to(folder)}"), files))

    def copy(self, source: str, to: str):
        """A copy of every object under `source/` at `to/`, made by the server (CopyObject)."""
        from concurrent.futures import ThreadPoolExecutor

        keys = [
            o["Key"]
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=f"{source}/")
            for o in page.get("Contents", [])
        ]
        copy = lambda k: self.s3.copy_object(Bucket="bench", Key=to + k[len(source):], CopySource={"Bucket": "bench", "Key": k})
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(copy, keys))


def s3_workloads(args, work: Path, results: Results, ratios: dict):
    window = range(args.window_first, args.window_first + args.slices)
    inputs = work / "inputs"
    make_inputs(inputs, args.seed, window, args.rows_per_month)
    server = S3Server(work)
    requests = {}
    try:
        server.upload(inputs, "inputs")
        for variant in ["unpartitioned", "partitioned"]:
            base = work / f"orders-{args.months}m-{variant}"
            make_table(base, args.seed, range(args.months), args.rows_per_month, variant == "partitioned")
            server.upload(base, f"base-{variant}")
            name = f"S3 apply, {variant}"
            first, last = month_start(window.start), month_end(window.stop - 1)
            for run in range(args.runs):
                if run == 0:
                    server.mark("start")
                for contender in rotate(["bf", "loop"], run):
                    scratch = fresh_scratch(work)
                    table = f"runs/{variant}-{run}-{contender}"
                    server.copy(f"base-{variant}", table)
                    uri = f"s3://bench/{table}"
                    if contender == "bf":
                        plan = plan_text(uri, "s3://bench/inputs", first, last, "month", f"s3://bench/{table}-rehearsal")
                        (scratch / "plan.toml").write_text(plan)
                        cpu = {}

                        def mark(label: str, logged=run == 0):
                            # The server's CPU around each mark: the phase between two marks, not the marks.
                            before = server.cpu_seconds()
                            if logged:
                                server.mark(label)
                            cpu[label] = (before, server.cpu_seconds())

                        plan_and_apply(args, scratch, results, name, mark)
                        for phase, end in [("plan", "apply"), ("apply", "end")]:
                            served = cpu[end][0] - cpu[phase][1]
                            results.add(name, f"  server CPU: bf {phase}", Measured(served, 0, ""))
                    else:
                        if run == 0:
                            server.mark("loop")
                        before = server.cpu_seconds()
                        results.add(name, "loop", measure(this_script("_loop", uri, "s3://bench/inputs", *window), scratch))
                        results.add(name, "  server CPU: loop", Measured(server.cpu_seconds() - before, 0, ""))
                        if run == 0:
                            server.mark("end")
                    if run == 0:
                        check_rows(uri, args.months * args.rows_per_month, contender)
                if run == 0:
                    requests[name] = server.requests([f"runs/{variant}-0-{c}" for c in ("bf", "loop")])
            loop = results.median(name, "loop")
            ratios[name] = {
                "bf apply / loop": results.median(name, "bf apply") / loop,
                "bf plan + apply / loop": results.median(name, "bf plan + apply") / loop,
            }

        request_costs(server, work / f"orders-{args.months}m-partitioned", results, 40 if args.smoke else 300)

        # The clone on S3: a one-day plan on the table of --clone-files files, one per day.
        name = f"S3 clone of {args.clone_files} files"
        base = work / "w2-files-small"
        make_many_files(base, args.clone_files, 1)
        server.upload(base, "files-small")
        last_day = dt.date(2000, 1, 1) + dt.timedelta(days=args.clone_files - 1)
        day_inputs = work / "w2-day-small"
        day_inputs.mkdir(exist_ok=True)
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
        from deltalake import DeltaTable

        day_rows = DeltaTable(str(base)).to_pyarrow_dataset().to_table(filter=ds.field("order_date") == last_day)
        pq.write_table(day_rows, day_inputs / f"orders_{last_day}.parquet")
        for run in range(args.runs):
            scratch = fresh_scratch(work)
            rehearsal = f"s3://bench/runs/files-rehearsal-{run}"
            (scratch / "plan.toml").write_text(plan_text("s3://bench/files-small", day_inputs, last_day, last_day, "day", rehearsal))
            planned = measure([args.bf, "plan", "plan.toml", "-q"], scratch)
            clone = json.loads((scratch / ".bf/plan.json").read_text())["rehearsal"]["clone"]
            assert clone["files_referenced"] == args.clone_files, clone
            results.add(name, "bf clone", Measured(clone["millis"] / 1000, planned.peak_rss_mb, ""))
            results.add(name, "bf plan (one day)", planned)
        ratios[name] = {"bf clone / bf plan (one day)": results.median(name, "bf clone") / results.median(name, "bf plan (one day)")}
    finally:
        server.stop()
    # Where bf's requests go, from the first run of each layout: the S3 profile.
    for name, counts in requests.items():
        print(f"\n{name}: requests to the server (first run)", file=sys.stderr)
        for row, n in counts.items():
            print(f"  {row} {n:>6}", file=sys.stderr)
    if args.s3_requests:
        args.s3_requests.write_text(json.dumps(requests, indent=2))


def request_costs(server: S3Server, table: Path, results: Results, n: int = 300):
    """What one request of each kind costs the server, in its CPU time: the day files of the table
    partitioned by day and its commits, sent and read back eight at a time as bf sends them. On
    moto a request's cost hardly depends on its size, so the S3 workloads measure how many
    requests a command makes."""
    from concurrent.futures import ThreadPoolExecutor

    days = [f.read_bytes() for f in sorted(table.rglob("*.parquet"))[:n]]
    commits = [f.read_bytes() for f in sorted((table / "_delta_log").glob("*.json"))]
    s3, name = server.s3, "S3 server CPU s per 1,000 requests"

    def cost(kind: str, request):
        before = server.cpu_seconds()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(request, range(len(days))))
        results.add(name, kind, Measured((server.cpu_seconds() - before) * 1000 / len(days), 0, ""))

    cost("PUT a day file", lambda i: s3.put_object(Bucket="bench", Key=f"costs/d/{i}", Body=days[i]))
    cost("PUT a day file, if none", lambda i: s3.put_object(Bucket="bench", Key=f"costs/e/{i}", Body=days[i], IfNoneMatch="*"))
    cost("GET a day file", lambda i: s3.get_object(Bucket="bench", Key=f"costs/d/{i}")["Body"].read())
    cost("GET 64 KiB of a day file", lambda i: s3.get_object(Bucket="bench", Key=f"costs/d/{i}", Range="bytes=0-65535")["Body"].read())
    cost("HEAD a day file", lambda i: s3.head_object(Bucket="bench", Key=f"costs/d/{i}"))
    cost("PUT a commit", lambda i: s3.put_object(Bucket="bench", Key=f"costs/l/{i:020}.json", Body=commits[i % len(commits)]))
    cost("GET a commit", lambda i: s3.get_object(Bucket="bench", Key=f"costs/l/{i:020}.json")["Body"].read())
    cost("LIST 40 commits", lambda i: s3.list_objects_v2(Bucket="bench", Prefix="costs/l/", MaxKeys=40))


def grow_log(base: Path, to: Path, commits: int, seed: int):
    """A copy of `base` with `commits` more commits of another writer, one order each in the first
    month (outside every window), as a table's daily job leaves years of history; deltalake writes
    its checkpoint every 100 commits. Made once per work folder."""
    from deltalake import DeltaTable, write_deltalake

    if to.exists():
        return
    growing = to.with_name(to.name + ".partial")
    fresh_copy(base, growing)
    table = DeltaTable(str(growing))
    for commit in range(commits):
        write_deltalake(table, orders(seed, 0, 1, first_id=10**9 + commit, corrected=False), mode="append")
    growing.rename(to)


def ledger_long_log(args, work: Path, results: Results, ratios: dict):
    """`bf status` and `bf rollback` of a one-month backfill on the unpartitioned table in a bucket
    whose log is --log-commits commits longer: what each reads of the log, by requests."""
    month = args.window_first
    base = work / f"orders-{args.months}m-unpartitioned"
    make_table(base, args.seed, range(args.months), args.rows_per_month, False)
    long_log = work / f"orders-{args.months}m-log-{args.log_commits}"
    grow_log(base, long_log, args.log_commits, args.seed)
    inputs = work / "inputs"
    make_inputs(inputs, args.seed, range(month, month + 1), args.rows_per_month)
    one_month = work / "inputs-one-month"
    one_month.mkdir(exist_ok=True)
    input_file = f"orders_{month_start(month)}.parquet"
    if not (one_month / input_file).exists():
        os.link(inputs / input_file, one_month / input_file)
    server = S3Server(work)
    name = f"S3 long log: {args.log_commits} more commits"
    try:
        server.upload(one_month, "inputs")
        server.upload(long_log, "long-log")
        for run in range(args.runs):
            scratch = fresh_scratch(work)
            table = f"runs/long-log-{run}"
            server.copy("long-log", table)
            uri = f"s3://bench/{table}"
            plan = plan_text(uri, "s3://bench/inputs", month_start(month), month_end(month), "month", f"{uri}-rehearsal")
            (scratch / "plan.toml").write_text(plan)
            mark = server.mark if run == 0 else (lambda label: None)
            plan_and_apply(args, scratch, results, name, mark)
            mark("status")
            results.add(name, "bf status", measure([args.bf, "status"], scratch))
            mark("rollback")
            results.add(name, "bf rollback", measure([args.bf, "rollback", "--auto-approve"], scratch))
            mark("end")
            if run == 0:
                check_rows(uri, args.months * args.rows_per_month + args.log_commits, "bf rollback")
                requests = server.requests([table])
    finally:
        server.stop()
    print(f"\n{name}: bf's requests to the server (first run)", file=sys.stderr)
    for row, n in requests.items():
        print(f"  {row} {n:>6}", file=sys.stderr)
    # Each GET of the table's log is a commit (or checkpoint) file read: what a long log costs.
    log_gets = lambda verb: sum(n for row, n in requests.items() if row.split() == [*verb.split(), "GET", "table", "log"])
    ratios[name] = {f"{verb}: GETs of the table's log": log_gets(verb) for verb in ["bf status", "bf rollback"]}


def w5_daily(args, work: Path, results: Results, ratios: dict):
    months = range(24, 36)  # 2025
    base = work / f"w5-2025-{args.w5_rows_per_day}"
    make_daily_table(base, args.seed, months, args.w5_rows_per_day)
    inputs = work / f"w5-inputs-{args.w5_rows_per_day}"
    make_daily_inputs(inputs, args.seed, months, args.w5_rows_per_day)
    rows = delta_rows(base)
    first = month_start(24)
    for slices in args.w5_slices:
        name = f"W5 {slices} one-day slices"
        last = first + dt.timedelta(days=slices - 1)
        for run in range(args.runs):
            for contender in rotate(["bf", "loop", "sample"], run):
                scratch = fresh_scratch(work)
                table = fresh_copy(base, scratch / "table")
                if contender == "bf":
                    (scratch / "plan.toml").write_text(plan_text(table, inputs, first, last, "day", scratch / "rehearsal"))
                    plan_and_apply(args, scratch, results, name)
                elif contender == "sample":
                    # A first look (`bf plan --sample 3`) at the same plan, on a table of its own.
                    (scratch / "plan.toml").write_text(plan_text(table, inputs, first, last, "day", scratch / "rehearsal"))
                    results.add(name, "bf plan --sample 3", measure([args.bf, "plan", "plan.toml", "--sample", "3", "-q"], scratch))
                else:
                    results.add(name, "loop", measure(this_script("_daily", table, inputs, first, last), scratch))
                if run == 0:
                    check_rows(table, rows, contender)
        loop = results.median(name, "loop")
        ratios[name] = {
            "bf plan ms per slice": results.median(name, "bf plan") / slices * 1000,
            "bf apply ms per slice": results.median(name, "bf apply") / slices * 1000,
            "loop ms per slice": loop / slices * 1000,
            "bf apply / loop": results.median(name, "bf apply") / loop,
            "bf plan + apply / loop": results.median(name, "bf plan + apply") / loop,
            "bf plan --sample 3 / bf plan": results.median(name, "bf plan --sample 3") / results.median(name, "bf plan"),
        }


CLUSTER_QUERY = (
    "SELECT MIN(o.order_id) AS order_id, o.customer, MIN(o.sku) AS sku, SUM(o.quantity) AS quantity, "
    "ROUND(SUM(o.amount * fx.rate), 2) AS amount, 'EUR' AS currency, o.order_date "
    "FROM orders o JOIN fx ON o.currency = fx.currency GROUP BY o.customer, o.order_date"
)


class BenchCluster:
    """`bf cluster scheduler` and two `bf cluster worker`s on 127.0.0.1, each its own process."""

    def __init__(self, bf: str, work: Path, workers: int = 2):
        import re

        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.logs = []
        self.scheduler = self._start([bf, "cluster", "scheduler", "--bind", "127.0.0.1:0"], "scheduler")
        deadline = time.monotonic() + 60
        while not (m := re.search(r"df://[\d.]+:\d+", self.logs[0].read_text())):
            if time.monotonic() > deadline:
                sys.exit("the benchmark's scheduler did not start")
            time.sleep(0.05)
        self.address = m.group(0)
        self.work_dirs = [work / f"worker-{i}" for i in range(workers)]
        self.workers = []
        for i, work_dir in enumerate(self.work_dirs):
            work_dir.mkdir(parents=True, exist_ok=True)
            argv = [bf, "cluster", "worker", "--scheduler", self.address[len("df://"):], "--bind", "127.0.0.1:0", "--work-dir", str(work_dir)]
            self.workers.append(self._start(argv, f"worker-{i}"))
        while f"ready: {workers} executors" not in self.ready():
            if time.monotonic() > deadline:
                sys.exit("the benchmark's workers did not join")
            time.sleep(0.1)

    def _start(self, argv, name):
        log = self.work / f"{name}.log"
        self.logs.append(log)
        return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.DEVNULL)

    def ready(self) -> str:
        import urllib.request

        try:
            with urllib.request.urlopen(self.address.replace("df://", "http://") + "/readyz", timeout=5) as answer:
                return answer.read().decode()
        except Exception as e:  # not ready yet: 503, or not listening
            return str(e)

    def kept_bytes(self) -> int:
        return sum(f.stat().st_size for d in self.work_dirs for f in d.rglob("*") if f.is_file())

    def workers_peak_rss_mb(self) -> float:
        peaks = []
        for worker in self.workers:
            status = Path(f"/proc/{worker.pid}/status").read_text()
            peaks.append(next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM")) / 1024)
        return max(peaks)

    def stop(self):
        for process in [*self.workers, self.scheduler]:
            process.terminate()
        for process in [*self.workers, self.scheduler]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def w6_cluster(args, work: Path, results: Results, ratios: dict):
    import pyarrow as pa
    import pyarrow.parquet as pq

    month = 0
    inputs = work / f"w6-inputs-{args.w6_rows}"
    make_inputs(inputs, args.seed, range(month, month + 1), args.w6_rows)
    fx = inputs / "fx.parquet"
    pq.write_table(pa.table({"currency": ["EUR", "USD", "GBP", "CHF"], "rate": [1.0, 0.92, 1.17, 1.05]}), fx)
    # The table holds what the query makes, about one row per customer and day: far fewer rows
    # than the events it is computed from, as a silver table is beside its bronze events.
    base = work / f"w6-table-{args.w6_rows}"
    make_table(base, args.seed, range(month, month + 1), max(args.w6_rows // 16, 100), partitioned=False)
    first, last = month_start(month), month_end(month)
    name = f"W6 one slice of {args.w6_rows:,} rows joined and aggregated"
    cluster = BenchCluster(args.bf, work / "w6-cluster")
    commands = 0
    try:
        for run in range(max(1, min(args.runs, 3))):
            for contender in rotate(["here", "cluster"], run):
                scratch = fresh_scratch(work)
                table = fresh_copy(base, scratch / "table")
                text = plan_text(table, inputs, first, last, "month", scratch / "rehearsal")
                text = text.replace(f'query = "{QUERY}"', f'inputs.fx = {{ path = "{fx}", format = "parquet" }}\nquery = "{CLUSTER_QUERY}"')
                (scratch / "plan.toml").write_text(text)
                env, label = ({"BF_CLUSTER": cluster.address}, " on the cluster") if contender == "cluster" else ({}, "")
                results.add(name, "bf plan" + label, measure([args.bf, "plan", "plan.toml", "-q"], scratch, env))
                results.add(name, "bf apply --recompute" + label, measure([args.bf, "apply", "--recompute", "--auto-approve", "-q"], scratch, env))
                commands += 2 if contender == "cluster" else 0
                if run == 0:
                    written = delta_rows(table)
                    if contender == "here":
                        expected = written
                    elif written != expected:
                        sys.exit(f"on the cluster the table holds {written} rows, in bf's process {expected}")
        workers_peak = cluster.workers_peak_rss_mb()
        kept = cluster.kept_bytes()
    finally:
        cluster.stop()
    peak = {c: max(m.peak_rss_mb for m in runs) for c, runs in results.samples[name].items()}
    ratios[name] = {
        "cluster plan s / here": results.median(name, "bf plan on the cluster") / results.median(name, "bf plan"),
        "cluster apply s / here": results.median(name, "bf apply --recompute on the cluster") / results.median(name, "bf apply --recompute"),
        "bf plan peak RSS MiB, here": peak["bf plan"],
        "bf plan peak RSS MiB, cluster": peak["bf plan on the cluster"],
        "bf apply peak RSS MiB, here": peak["bf apply --recompute"],
        "bf apply peak RSS MiB, cluster": peak["bf apply --recompute on the cluster"],
        "a worker's peak RSS MiB": workers_peak,
        "worker bytes kept per command MiB": kept / max(commands, 1) / 2**20,
    }


def check_rows(table: Path | str, expected: int, who: str):
    found = delta_rows(table)
    if found != expected:
        sys.exit(f"{who} left {found} rows in {table}, expected {expected}")


# ----------------------------------------------------------------------------------------------


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_loop":
        table, inputs, *months = sys.argv[2:]
        python_loop(table, inputs, [int(m) for m in months])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_daily":
        table, inputs, first, last = sys.argv[2:]
        daily_loop(table, inputs, dt.date.fromisoformat(first), dt.date.fromisoformat(last))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_limit":
        inputs, out, layout, *months = sys.argv[2:]
        parquet_limit(inputs, out, [int(m) for m in months], partitioned=layout == "partitioned")
        return

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bf", required=True, help="the bf binary to measure")
    parser.add_argument("--work", type=Path, help="where workloads are generated (default: a temp dir)")
    parser.add_argument("--months", type=int, default=36)
    parser.add_argument("--rows-per-month", type=int, default=200_000)
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--w3-rows", type=int, default=10_000_000)
    parser.add_argument("--w6-rows", type=int, default=10_000_000, help="W6's slice: orders joined and aggregated")
    parser.add_argument("--w3-memory-limit", default="256MiB", help="BF_MEMORY_LIMIT for W3's bounded bf")
    parser.add_argument("--clone-files", type=int, default=10_000)
    parser.add_argument("--w5-rows-per-day", type=int, default=200)
    parser.add_argument("--w5-slices", default="30,90,365", help="W5's slice counts, comma-separated")
    parser.add_argument("--log-commits", type=int, default=1000, help="the long-log workload's commits after the table's own")
    parser.add_argument("--workloads", default="w1,w2,w3,w4,w5,w6,s3,ledger")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the medians and ratios here")
    parser.add_argument("--s3-requests", type=Path, help="write bf's requests to the S3 server, counted by phase, here")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and one run, to prove the script works")
    args = parser.parse_args()
    if args.smoke:
        args.months, args.rows_per_month, args.slices, args.runs = 4, 500, 2, 1
        args.w3_rows, args.clone_files, args.w6_rows = 2_000, 40, 2_000
        args.w5_rows_per_day, args.w5_slices = 5, "2,3"
        args.log_commits = 40
    if args.slices > args.months:
        parser.error("--slices cannot exceed --months")
    args.window_first = min(12, args.months - args.slices)
    args.bf = str(Path(args.bf).resolve())
    args.w5_slices = [int(n) for n in str(args.w5_slices).split(",")]

    work = args.work or Path(tempfile.mkdtemp(prefix="bf-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results, ratios = Results(), {}
    workloads = {"w1": w1_apply, "w2": w2_plan, "w3": w3_memory, "w4": w4_resume, "w5": w5_daily, "w6": w6_cluster, "s3": s3_workloads, "ledger": ledger_long_log}
    started = time.perf_counter()
    for key in args.workloads.split(","):
        print(f"== {key} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        workloads[key.strip()](args, work, results, ratios)
    if not args.work:
        shutil.rmtree(work)

    summary = results.summary()
    for workload, contenders in summary.items():
        print(f"\n{workload}")
        print(f"  {'contender':<40} {'median s':>9} {'min s':>8} {'max s':>8} {'peak RSS MiB':>13} {'CPU s':>7}")
        for contender, s in contenders.items():
            print(
                f"  {contender:<40} {s['median_s']:>9.3f} {s['min_s']:>8.3f} {s['max_s']:>8.3f}"
                f" {s['peak_rss_mb']:>13.0f} {'-' if s['cpu_s'] is None else format(s['cpu_s'], '.2f'):>7}"
            )
        for ratio, value in ratios.get(workload, {}).items():
            print(f"  {ratio:<40} {value:>9.2f}")
    config = {k: v for k, v in vars(args).items() if k not in ("json", "work", "s3_requests")}
    config["work"] = str(args.work) if args.work else None
    if args.json:
        args.json.write_text(json.dumps({"config": config, "medians": summary, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()

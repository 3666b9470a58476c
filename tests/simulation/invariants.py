"""What must hold after every step, and how each of bf's answers is judged.

Each rule cites where bf promises it (README, docs/RELIABILITY.md). A refusal that says why is always
fine, except where bf's own documents say the case must go through (a false refusal); the violations
are a lost or changed row, a false statement, a panic.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import re
import urllib.parse

import pyarrow.parquet as pq

import deltalog
import tables
from model import Violation

_DUCK = None


def duck() -> tables.Duck:
    global _DUCK
    if _DUCK is None:
        _DUCK = tables.Duck()
    return _DUCK


def row_key(row: dict, columns: list[str]) -> tuple:
    return tables.normalise_row(row, columns)


def day(s: str) -> dt.date:
    return dt.date.fromisoformat(s)


# --- after every step ---------------------------------------------------------------------------


def check_all(sim) -> None:
    sim.absorb({})
    check_rows(sim)
    check_second_reader(sim)
    check_status(sim)
    if sim.shape.mapping == "id":
        check_field_ids(sim)
    if sim.shape.row_tracking:
        check_row_tracking(sim)
    if sim.shape.identity:
        check_identity(sim)


def check_rows(sim) -> None:
    """The table holds exactly the model's rows: nobody's row lost, changed or added but by what
    a reviewed slice or a rollback allowed."""
    cols = sim.model.columns()
    try:
        actual = tables.read_rows(sim.table)
    except Exception as error:
        sim.violation("unreadable-table", f"the Python package cannot read the table: {str(error)[:500]}")
        return
    counts = collections.Counter(r["order_id"] for r in actual)
    dups = [k for k, n in counts.items() if n > 1]
    if dups:
        sim.violation("duplicated-row", f"orders held more than once: {sorted(dups)[:10]}")
        return
    have = {r["order_id"]: r for r in actual}
    want = sim.model.rows()
    problems = []
    for k in sorted(set(have) | set(want)):
        a, m = have.get(k), want.get(k)
        if a is not None and m is not None and row_key(a, cols) == row_key(m, cols):
            continue
        entry = sim.model.entries.get(k)
        who = entry.describe() if entry else "never written"
        problems.append((k, entry, f"order {k}: table {row_key(a, cols) if a else 'has no row'}, "
                                    f"model {row_key(m, cols) if m else 'no row'} ({who})"))
    if not problems:
        return
    writers = {(e.writer.split(":")[0] if e else "none") for _, e, _ in problems}
    if writers & {"other", "init", "resync"}:
        kind = "others-row-lost-or-changed"
    elif writers & {"bf"}:
        kind = "window-not-as-rehearsed"
    elif writers & {"rollback", "restore"}:
        kind = "rollback-not-pre-version"
    else:
        kind = "unexpected-row"
    sim.violation(kind, f"the table differs from the model after step {sim.step_no}:\n  "
                  + "\n  ".join(p for _, _, p in problems[:15]))


def readers_agree(sim) -> tuple[str, str] | None:
    """None when DuckDB's Delta extension reads the rows the Python package reads; else the kind of
    the disagreement and what it is."""
    try:
        ours = tables.read_rows(sim.table)
    except Exception:
        return None
    try:
        theirs = duck().rows(sim.table)
    except Exception as error:
        return "second-reader-fails", f"DuckDB cannot read the table: {str(error)[:500]}"
    cols = sorted(set().union(*[r.keys() for r in ours]) if ours else sim.model.columns())
    a = collections.Counter(row_key(r, cols) for r in ours)
    b = collections.Counter(row_key(r, cols) for r in theirs)
    if a != b:
        only_a = list((a - b).elements())[:6]
        only_b = list((b - a).elements())[:6]
        return ("second-reader-differs", f"deltalake and DuckDB read different rows ({cols}):\n  deltalake only: "
                                         f"{only_a}\n  DuckDB only: {only_b}")
    return None


def check_second_reader(sim) -> None:
    """A reader that is not bf's crate (DuckDB's Delta extension, delta-kernel-rs) reads the same
    rows as the Python package (docs/RELIABILITY.md, "A second reader")."""
    if not sim.second_reader:
        return
    found = readers_agree(sim)
    if found:
        sim.violation(*found)


def latest_backfill(sim, plan_id: str) -> str | None:
    bids = [c.backfill_id for c in sim.model.journal if c.kind == "slice" and c.plan_id == plan_id]
    return bids[-1] if bids else None


def check_status(sim) -> None:
    """What `bf status` says is true: which backfill, which slices, the version to go back to, the
    version a rollback put back, and whether a rollback is still possible (README, "Undo")."""
    for plan in sim.plans.values():
        if plan.saved is None:
            continue
        js = sim.bf.run(plan.folder, ["status", "--json"])
        sim.judge_exit(js)
        if js.code != 0:
            continue
        try:
            state = json.loads(js.stdout)
        except ValueError:
            sim.violation("status-not-json", js.summary())
            continue
        if state.get("log_cleaned_before") is not None:
            continue
        txt = sim.bf.run(plan.folder, ["status"])
        sim.judge_exit(txt)
        plan_id = plan.saved["id"]
        expected = latest_backfill(sim, plan_id)
        where = f"plan {plan.n} (saved plan {plan_id})"
        if state.get("backfill_id") != expected:
            sim.violation("status-wrong-backfill",
                          f"{where}: bf status names backfill {state.get('backfill_id')}; the log's latest of "
                          f"this plan is {expected}")
            continue
        if expected is None:
            continue
        b = sim.backfills[expected]
        if sorted(state.get("committed", [])) != sorted(b.slices):
            sim.violation("status-wrong-slices",
                          f"{where}: bf status says slices {state.get('committed')} of {expected} are committed; "
                          f"the log holds {sorted(b.slices)}")
        m = re.search(r"the version to go back to: (\d+)", txt.stdout)
        if m and int(m.group(1)) != b.pre_version:
            sim.violation("status-wrong-version-to-go-back-to",
                          f"{where}: bf status says \"the version to go back to: {m.group(1)}\"; backfill "
                          f"{expected}'s commits record bf.pre_version {b.pre_version}\n{txt.stdout}")
        m = re.search(r"rolled back at version (\d+), to the rows of version (\d+)", txt.stdout)
        if m:
            at, rows_of = int(m.group(1)), int(m.group(2))
            if rows_of != b.pre_version:
                sim.violation("status-wrong-rolled-back-version",
                              f"{where}: bf status says the rollback put back \"the rows of version {rows_of}\"; "
                              f"backfill {expected}'s pre-version is {b.pre_version}\n{txt.stdout}")
            if not any(c.rollback_of == expected and c.version <= at for c in sim.model.journal):
                sim.violation("status-wrong-rolled-back-version",
                              f"{where}: bf status says backfill {expected} was rolled back at version {at}; no "
                              f"rollback of it is in the log by then")
        horizon = state.get("rollback")
        if horizon:
            check_horizon(sim, b, horizon, where)


def _pre_version_files(sim, b):
    snap = deltalog.snapshot(sim.table, b.pre_version)
    if snap is None:
        return None, [], []
    phys = snap.physical_name("day")
    missing = [p for p in snap.files if not deltalog.file_exists(sim.table, p)]
    window_missing = [p for p in missing
                      if deltalog.overlaps(deltalog.file_days(snap.files[p], phys), b.window[0], b.window[1])]
    return snap, missing, window_missing


def check_horizon(sim, b, horizon: dict, where: str) -> None:
    state = horizon.get("state")
    snap, missing, window_missing = _pre_version_files(sim, b)
    if state == "gone":
        if snap is not None and not missing:
            sim.violation("rollback-horizon-false",
                          f"{where}: bf status says the rollback of {b.id} is no longer possible "
                          f"({horizon.get('why')}), but version {b.pre_version}'s log and every one of its "
                          f"{len(snap.files)} files are there")
        elif snap is not None and not window_missing:
            sim.violation("rollback-horizon-false-window-intact",
                          f"{where}: bf status says the rollback of {b.id} is no longer possible "
                          f"({horizon.get('why')}), but every file of version {b.pre_version} holding the "
                          f"window {b.window[0]}..{b.window[1]} is there ({len(missing)} others are gone): "
                          f"`--window-only` can still put the window back")
    elif snap is None and b.pre_version < min(deltalog.versions(sim.table) or [0]):
        sim.violation("rollback-horizon-false",
                      f"{where}: bf status says the rollback of {b.id} is possible, but version "
                      f"{b.pre_version}'s commit is no longer in the log")
    elif window_missing:
        sim.violation("rollback-horizon-false",
                      f"{where}: bf status says the rollback of {b.id} is possible, but VACUUM removed "
                      f"{len(window_missing)} of version {b.pre_version}'s files in the window")


def check_field_ids(sim) -> None:
    """Column mapping by id (PROTOCOL.md): every field id a data file carries is a column's id, at
    most `delta.columnMapping.maxColumnId`, under that column's physical name; else the next column
    any writer adds is read from another column's values."""
    snap = deltalog.snapshot(sim.table)
    if snap is None:
        return
    top = int(snap.configuration.get("delta.columnMapping.maxColumnId", "0"))
    by_id = {}
    for f in snap.schema.get("fields", []):
        meta = f.get("metadata") or {}
        if "delta.columnMapping.id" in meta:
            by_id[int(meta["delta.columnMapping.id"])] = meta.get("delta.columnMapping.physicalName")
    for path in snap.files:
        schema = pq.read_schema(os.path.join(sim.table, urllib.parse.unquote(path)))
        for field in schema:
            fid = (field.metadata or {}).get(b"PARQUET:field_id")
            if fid is None:
                continue
            fid = int(fid)
            if fid > top:
                sim.violation("column-mapping-id-beyond-max",
                              f"{path} holds column {field.name} with field id {fid}, above "
                              f"delta.columnMapping.maxColumnId = {top}: the next column added gets id {top + 1}")
                return
            if fid in by_id and by_id[fid] != field.name:
                sim.violation("column-mapping-id-collision",
                              f"{path} holds column {field.name} with field id {fid}, which is column "
                              f"{by_id[fid]}'s id: a reader by field id reads its values as that column's")
                return


def check_row_tracking(sim) -> None:
    """Row tracking (PROTOCOL.md, README "Which tables bf writes"): ids unique; a row keeps its id
    and commit version until a commit changes it (rows a slice copies keep both, a merge's update
    keeps its id); a row's commit version is the version that last changed it; the high-water mark
    never goes down and no id is above it; in-commit timestamps only go up."""
    snap = deltalog.snapshot(sim.table)
    if snap is None:
        return
    ids = deltalog.row_tracking_ids(sim.table, snap)
    seen = collections.Counter(r for r, _ in ids.values())
    twice = [r for r, n in seen.items() if n > 1]
    if twice:
        sim.violation("row-id-duplicated", f"row ids held by more than one row: {twice[:10]}")
        return
    dom = snap.domains.get("delta.rowTracking")
    mark = json.loads(dom["configuration"])["rowIdHighWaterMark"] if dom else -1
    if mark < sim.last_mark:
        sim.violation("row-id-mark-lowered", f"the high-water mark went from {sim.last_mark} to {mark}")
    sim.last_mark = max(mark, sim.last_mark)
    above = [r for r, _ in ids.values() if r is not None and r > mark]
    if above:
        sim.violation("row-id-above-mark", f"row ids above the high-water mark {mark}: {above[:10]}")
    problems = []
    for k, e in sim.model.entries.items():
        if e.row is None or k not in ids or e.writer == "resync":
            continue
        rid, rcv = ids[k]
        if rcv != e.version:
            problems.append(f"order {k} ({e.describe()}) has row commit version {rcv}, not {e.version}")
        if e.rid is None:
            e.rid = rid
        elif e.rid != rid:
            problems.append(f"order {k} ({e.describe()}) has row id {rid}; it had {e.rid}")
    if problems:
        sim.violation("row-id-not-kept", "\n  ".join(problems[:12]))
    check_in_commit_timestamps(sim)


def check_identity(sim) -> None:
    """An identity column GENERATED ALWAYS (README, "Which tables bf writes"): the rows a slice
    writes get values beyond the mark, one each; the rows a slice copies keep theirs and a row a
    merge updates keeps its own; a rollback puts the old values back; the mark never goes down and
    no value is above it."""
    snap = deltalog.snapshot(sim.table)
    if snap is None:
        return
    mark = tables.identity_mark(snap)
    seq = {r["order_id"]: r.get("seq") for r in tables.read_rows(sim.table)}
    before = sim.last_identity_mark
    if before is not None and (mark is None or mark < before):
        sim.violation("identity-mark-lowered", f"the identity high-water mark went from {before} to {mark}")
    values = [v for v in seq.values() if v is not None]
    twice = [v for v, n in collections.Counter(values).items() if n > 1]
    if twice:
        sim.violation("identity-value-duplicated", f"identity values held by more than one row: {twice[:10]}")
    above = [v for v in values if mark is not None and v > mark]
    if above:
        sim.violation("identity-value-above-mark", f"identity values above the mark {mark}: {above[:10]}")
    problems = []
    for k, e in sim.model.entries.items():
        if e.row is None or k not in seq or e.writer == "resync":
            continue
        want = e.row.get("seq")
        if want is None:
            e.row["seq"] = seq[k]
            if before is not None and (seq[k] is None or seq[k] <= before):
                problems.append(f"order {k} ({e.describe()}) got identity value {seq[k]}, not beyond the mark "
                                f"{before}")
        elif seq[k] != want:
            problems.append(f"order {k} ({e.describe()}) has identity value {seq[k]}; it had {want}")
    if problems:
        sim.violation("identity-value-changed", "\n  ".join(problems[:12]))
    sim.last_identity_mark = mark if before is None else max(before, mark or before)


def check_in_commit_timestamps(sim) -> None:
    last, start = 0, None
    for v in deltalog.versions(sim.table):
        info = deltalog.commit_info(deltalog.read_commit(sim.table, v) or [])
        ict = info.get("inCommitTimestamp")
        if start is None and ict is None:
            continue
        start = v if start is None else start
        if ict is None or ict <= last:
            sim.violation("in-commit-timestamp-not-increasing",
                          f"version {v}: in-commit timestamp {ict}, the one before {last}")
            return
        last = ict


# --- a plan -------------------------------------------------------------------------------------


def expected_slice_rows(sim, state: dict, first: dt.date, last: dt.date) -> dict:
    spec = state["spec"]
    source = {r["order_id"]: r for r in state["corrections"] if first <= r["day"] <= last}
    current = sim.model.rows_on(first, last)
    if spec["mode"] == "replace":
        return source
    out = {k: r for k, r in current.items() if not spec.get("delete_missing")}
    out.update(source)
    return out


def check_plan_statements(sim, plan, saved: dict, state: dict) -> None:
    """What `bf plan` says of each slice is true (its rows before and after), and a day of a slice
    the source leaves without rows where the table holds some fails the plan unless
    `allow_empty_slices` (README, "What `bf apply` does": "a file with only its header, a missing
    day")."""
    spec = state["spec"]
    for s in saved.get("slices", []):
        first, last = day(s["first"]), day(s["last"])
        before = len(sim.model.rows_on(first, last))
        after = len(expected_slice_rows(sim, state, first, last))
        said_before = (s.get("before") or {}).get("rows")
        said_after = (s.get("after") or {}).get("rows")
        if said_before is not None and said_before != before:
            sim.violation("plan-statement-false",
                          f"plan {plan.n}: slice {s['index']} ({first}..{last}) says {said_before} rows before; "
                          f"the table holds {before}")
        if said_after is not None and said_after != after:
            sim.violation("plan-statement-false",
                          f"plan {plan.n}: slice {s['index']} ({first}..{last}) says {said_after} rows after; "
                          f"its source makes {after}")
        if spec.get("allow_empty") or (spec["mode"] == "merge" and not spec.get("delete_missing")):
            continue
        emptied = []
        for i in range((last - first).days + 1):
            d = first + dt.timedelta(days=i)
            if sim.model.rows_on(d, d) and not any(r["day"] == d for r in state["corrections"]):
                emptied.append(d.isoformat())
        if emptied:
            sim.violation("day-emptied-silently",
                          f"plan {plan.n} ({spec['every']} slices, mode {spec['mode']}) exits 0 with no problem, "
                          f"though its source has no row for {emptied} in slice {s['index']} ({first}..{last}) "
                          f"where the table holds some: applied, those days are emptied; no guard fired")


# --- an apply -----------------------------------------------------------------------------------


def committed_since(sim, plan_id: str, before: int) -> list:
    return [c for c in sim.model.journal if c.version > before and c.kind == "slice" and c.plan_id == plan_id]


def check_crash_landing(sim, plan, fault: str, before: int) -> None:
    """A crash lands exactly where it struck (docs/RELIABILITY.md, the first claim)."""
    if plan.saved is None:
        return
    ks = sorted(k for b in sim.backfills.values() if b.plan_id == plan.saved["id"]
                for k, (v, _, _) in b.slices.items() if v > before)
    point, _, n = fault.partition(":")
    comments = [c for c in sim.model.journal if c.version > before and c.kind == "comment"
                and c.plan_id == plan.saved["id"]]
    wrong = None
    if point == "after-commit":
        if not ks or ks[-1] != int(n):
            wrong = f"slices {ks} committed, the last of them should be {n}"
    elif point in ("before-slice", "before-publish-commit"):
        if ks and ks[-1] >= int(n):
            wrong = f"slices {ks} committed, none from {n} on should be"
    elif point == "before-comment" and comments:
        wrong = "the comment was written"
    if wrong:
        sim.violation("crash-landed-elsewhere", f"BF_FAULT={fault}: {wrong}")


def possible_blockers(sim, plan_id: str, pre_version: int, first: dt.date, last: dt.date,
                      removes: set[str]) -> list[str]:
    """The commits since the plan that bf's staleness rule (docs/RELIABILITY.md, "The staleness
    rule") may hold against a slice of `first`..`last`, read from the raw log."""
    latest = deltalog.latest_version(sim.table)
    full = deltalog.snapshot(sim.table, latest)
    adds = full.adds_seen if full else {}
    phys = full.physical_name("day") if full else "day"
    out = []
    for v in range(pre_version + 1, latest + 1):
        actions = deltalog.read_commit(sim.table, v)
        if actions is None:
            out.append(f"version {v}: cleaned from the log")
            continue
        info = deltalog.commit_info(actions)
        if info.get("bf.plan_id") == plan_id and ("bf.slice" in info or info.get("bf.comment")):
            continue
        if info.get("bf.comment") or ("bf.rollback_of" in info and not any("add" in a or "remove" in a
                                                                        for a in actions)):
            continue  # another backfill's comment
        if any("metaData" in a or "protocol" in a for a in actions):
            out.append(f"version {v}: {info.get('operation')} changes the table")
            continue
        for a in actions:
            f = a.get("add") or a.get("remove")
            if f is None:
                continue
            if "remove" in a and f["path"] in removes:
                out.append(f"version {v}: removes {f['path']}, which the slice replaces")
                break
            if not f.get("dataChange", True):
                continue
            days = deltalog.file_days(f, phys)
            if days is None and "remove" in a and f["path"] in adds:
                days = deltalog.file_days(adds[f["path"]], phys)
            if deltalog.overlaps(days, first, last):
                out.append(f"version {v}: {info.get('operation')} touches {days}")
                break
    return out


def judge_apply(sim, plan, r, before: int) -> None:
    if plan.saved is None:
        return
    plan_id = plan.saved["id"]
    state = sim.plan_ids.get(plan_id, (None, None))[1]
    said = r.said
    if r.code == 0:
        bid = latest_backfill(sim, plan_id)
        wrote = committed_since(sim, plan_id, before)
        if bid is not None and wrote and "--slice" not in r.args:
            b = sim.backfills[bid]
            want = {s["index"] for s in plan.saved.get("slices", [])}
            comment = any(c.kind == "comment" and c.backfill_id == bid for c in sim.model.journal)
            if set(b.slices) != want or not comment:
                sim.violation("apply-exit-0-unfinished",
                              f"bf apply exited 0, but backfill {bid} holds slices {sorted(b.slices)} of "
                              f"{sorted(want)}{'' if comment else ' and no comment'}\n{r.summary()}")
        # The rule is for every rollback: an apply may say the full rollback is gone while the
        # window-only one still reads every file of the window's days ("`bf rollback --window-only`
        # only"). A VACUUM inside the apply's pause may take what the rollback needs: not bf's.
        if wrote and "rollback: no longer possible" in said and not sim.others_during:
            sim.violation("apply-started-without-undo",
                          "bf apply wrote a backfill and says its rollback is no longer possible (README: \"A "
                          f"backfill is never started that no rollback could undo\")\n{r.summary()}")
    elif r.code == 1 and "since the plan, other commits touch its rows" in said and state is not None:
        named = re.findall(r"slice (\d+) \((\d{4}-\d\d-\d\d)\.\.(\d{4}-\d\d-\d\d)\) was not written: since the plan",
                           said)
        named += [(k, a, a) for k, a in re.findall(
            r"slice (\d+) \((\d{4}-\d\d-\d\d)\) was not written: since the plan", said)]
        spec = state["spec"]
        saved_slices = {s["index"]: s for s in plan.saved.get("slices", [])}
        for k, a, z in named:
            first, last = day(a), day(z)
            if spec.get("only"):
                first, last = day(spec["window"][0]), day(spec["window"][1])
            removes = set((saved_slices.get(int(k), {}).get("publication") or {}).get("removes") or [])
            if not possible_blockers(sim, plan_id, state["pre_version"], first, last, removes):
                sim.violation("false-stale-refusal",
                              f"bf apply refused slice {k} ({a}..{z}) as stale, but no commit since the plan "
                              f"(version {state['pre_version']}) is one the staleness rule holds against it "
                              f"(docs/RELIABILITY.md)\n{r.summary()}")


# --- a rollback ---------------------------------------------------------------------------------


def judge_rollback(sim, plan, step: dict, r, target) -> None:
    if r.code != 1:
        return
    said = r.said
    m = re.search(r"after backfill (\S+?)[;:]", said) or re.search(r"backfill (\d{8}T\d{6}Z-[0-9a-f-]+)", said)
    b = sim.backfills.get(m.group(1)) if m else target
    if b is None:
        return
    own = lambda c: c.backfill_id == b.id or c.rollback_of == b.id  # noqa: E731
    if "a full RESTORE would silently discard them" in said:
        blockers = [c for c in sim.model.since(b.pre_version) if not own(c) and not c.maintenance]
        if not blockers:
            sim.violation("false-refusal",
                          f"the full rollback of {b.id} was refused for other writers' commits, but since version "
                          f"{b.pre_version} only the backfill itself and maintenance committed\n{r.summary()}")
    elif "putting back the pre-version's rows would undo their work too" in said:
        first, last = b.window
        blockers = []
        for c in sim.model.since(b.pre_version):
            if own(c) or c.kind in ("comment", "rollback-comment", "add_column", "vacuum", "checkpoint",
                                    "cleanup"):
                continue
            if c.kind == "optimize" or (c.metadata and c.who == "other") or c.kind == "restore":
                blockers.append(c)
            elif c.data_change and any(first <= d <= last for d in c.days):
                blockers.append(c)
        if not blockers:
            sim.violation("false-refusal-window-only",
                          f"the window-only rollback of {b.id} was refused (\"other writers wrote inside the "
                          f"window\"), but no commit since version {b.pre_version} changed a row of "
                          f"{first}..{last} (docs/RELIABILITY.md: a DELETE outside the window \"is no write "
                          f"inside it\")\n{r.summary()}")
    elif "VACUUM removed" in said:
        snap, missing, window_missing = _pre_version_files(sim, b)
        window_only = step["how"] in ("window", "window-force")
        if snap is not None and (not missing or (window_only and not window_missing)):
            sim.violation("false-refusal-vacuum",
                          f"the {'window-only ' if window_only else ''}rollback of {b.id} was refused for files "
                          f"VACUUM removed, but every file of version {b.pre_version} "
                          f"{'holding the window ' if window_only else ''}is there\n{r.summary()}")


# --- bf gaps ------------------------------------------------------------------------------------

WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def check_gaps(sim, step: dict, text, js) -> None:
    """`bf gaps` lists the days without a row, but on weekdays the table is closed (README, "Which
    days need a backfill"); "No gaps: every day has rows" is said only when every day has."""
    first, last = day(step["from"]), day(step["to"])
    rows = sim.model.rows()
    with_rows = {r["day"] for r in rows.values()}
    empty = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)
             if first + dt.timedelta(days=i) not in with_rows]
    if text.code == 0 and "No gaps: every day has rows" in text.stdout and empty:
        sim.violation("gaps-false-statement",
                      f"bf gaps {first}..{last} says \"No gaps: every day has rows\"; {len(empty)} days have "
                      f"none: {[d.isoformat() for d in empty[:8]]}")
    if js.code != 0:
        return
    try:
        found = json.loads(js.stdout)
    except ValueError:
        sim.violation("gaps-not-json", js.summary())
        return
    missing = {day(d) for d in found.get("missing", [])}
    closed = set(found.get("closed", []))
    wrong = sorted(d for d in missing if d in with_rows)
    if wrong:
        sim.violation("gaps-false-statement", f"bf gaps lists {wrong[:5]} as missing; the table has rows there")
    unlisted = [d for d in empty if d not in missing and WEEKDAYS[d.weekday()] not in closed]
    if unlisted:
        sim.violation("gaps-false-statement",
                      f"bf gaps {first}..{last} does not list {[d.isoformat() for d in unlisted[:8]]}, days "
                      f"without a row on weekdays it does not call closed ({sorted(closed)})")
    for w in closed:
        on = [d for d in with_rows if first <= d <= last and WEEKDAYS[d.weekday()] == w]
        if on:
            sim.violation("gaps-false-statement",
                          f"bf gaps calls {w} a closed day, but the table has rows on {sorted(on)[:3]}")

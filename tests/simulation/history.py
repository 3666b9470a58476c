"""One history: a fresh table of a random shape, then steps — bf's commands and other writers — each
checked against the model after it.

`Sim` executes concrete steps (JSON: what a shrunk history saves and `--replay` reads), keeps the
model in step with every commit (bf's, read from the raw log, and the other writers', from what each
did) and judges bf's decisions as they land. `Machine` is the Hypothesis state machine drawing the
steps: its rules build concrete steps and hand them to `Sim`; its invariants are `Sim.check`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import tempfile

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import deltalog
import invariants
import tables
import writers
from bfcli import Bf, Run
from model import Commit, Model, Violation
from tables import DAYS, FIRST_DAY, LAST_DAY, Shape

COUNTRIES = ["FR", "DE", "ES", "IT", "US"]
EVERY = ["day", "week", "month", "3 days", "7 days", "10 days"]
APPLY_FAULTS = ["before-slice", "after-commit", "before-publish-commit", "before-comment"]
ROLLBACK_FAULTS = ["rollback-before-restore", "rollback-before-comment", "rollback-before-slice",
                   "rollback-after-commit"]
WRITER_OPS = ["append_in", "append_out"] * 3 + ["delete", "update", "merge", "overwrite_day", "optimize", "vacuum",
              "add_column", "set_property", "description", "checkpoint", "cleanup"]
RAW_WRITER_OPS = ["append_in", "append_out"] * 3 + ["delete", "update", "add_column", "set_property", "description"]


def day(s: str) -> dt.date:
    return dt.date.fromisoformat(s)


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


class PlanRec:
    """A plan folder: its plan file's choices, and what its latest `bf plan` saved."""

    def __init__(self, n: int, folder: str, spec: dict):
        self.n = n
        self.folder = folder
        self.spec = spec
        self.saved: dict | None = None
        self.corrections: list[dict] = []
        self.slices: list[tuple[int, dt.date, dt.date]] = []

    @property
    def window(self) -> tuple[dt.date, dt.date]:
        return day(self.spec["window"][0]), day(self.spec["window"][1])


class Backfill:
    def __init__(self, bid: str, plan_id: str, pre_version: int, window: tuple, only: bool, n: int):
        self.id = bid
        self.plan_id = plan_id
        self.pre_version = pre_version
        self.window = window
        self.only = only
        self.plan_n = n
        self.slices: dict[int, tuple[int, dt.date, dt.date]] = {}  # index -> (version, first, last)
        self.first_version: int | None = None


class Sim:
    def __init__(self, binary: str, known: set[str] | None = None, keep: bool = False):
        self.binary = binary
        self.known = known or set()
        self.keep = keep
        self.steps: list[dict] = []
        self.step_no = 0
        self.plans: dict[int, PlanRec] = {}
        self.plan_ids: dict[str, tuple[PlanRec, dict]] = {}  # saved plan id -> (plan, its saved state)
        self.backfills: dict[str, Backfill] = {}
        self.backfill_order: list[str] = []
        self.model = Model()
        self.noted: list[dict] = []  # known violations seen (and moved past)
        self.warnings: list[str] = []
        self.work = None
        self.second_reader = True
        self.last_identity_mark = None
        self.others_during = False
        self.last_planned: int | None = None
        self.last_applied: int | None = None
        self.last_mark = -1

    # --- set-up -------------------------------------------------------------------------------
    def init(self, shape: Shape, seed: int) -> None:
        self.steps.append({"op": "init", "shape": shape.to_json(), "seed": seed})
        if VERBOSE:
            print(f"history: {shape.name}, seed {seed}")
        self.shape = shape
        self.work = tempfile.mkdtemp(prefix="bf-sim-")
        self.table = os.path.join(self.work, "orders")
        os.makedirs(os.path.join(self.work, "plans"))
        os.makedirs(os.path.join(self.work, "rh"))
        self.bf = Bf(self.binary, self.work)
        rng = random.Random(seed)
        outage = None
        if rng.random() < 0.3:
            start = rng.randrange(DAYS)
            outage = (start, start + rng.randint(3, 20))
        rows, oid = [], 1
        for i in range(DAYS):
            if outage and outage[0] <= i <= outage[1]:
                continue
            for _ in range(rng.choices([0, 1, 2, 3], [0.1, 0.4, 0.35, 0.15])[0]):
                rows.append({"order_id": oid, "day": FIRST_DAY + dt.timedelta(days=i),
                             "amount": tables.amount_value(rng.randint(100, 99999), shape),
                             "country": rng.choice(COUNTRIES)})
                if shape.identity:
                    rows[-1]["seq"] = oid
                oid += 1
        self.next_id = oid
        cuts = sorted(rng.sample(range(1, DAYS), rng.randint(1, 3)))
        commits, last = [], FIRST_DAY
        for c in cuts + [DAYS]:
            edge = FIRST_DAY + dt.timedelta(days=c)
            commits.append([r for r in rows if last <= r["day"] < edge])
            last = edge
        commits = [c for c in commits if c]
        tables.create(self.table, shape, commits)
        v = deltalog.latest_version(self.table)
        for r in rows:
            self.model.set(r["order_id"], r, "init", v, 0)
        self.model.snap(v)
        self.model.journal.append(Commit(v, "other", "create", 0, data_change=True))
        # The second reader must agree on the table as the Python package made it; where it does
        # not (a reader's own limit), its later disagreements say nothing about bf.
        self.second_reader = invariants.readers_agree(self) is None
        if not self.second_reader:
            self.warnings.append(f"DuckDB does not read the {shape.name} table as made: second reader off")

    def close(self) -> None:
        if self.work and not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    # --- steps --------------------------------------------------------------------------------
    def execute(self, step: dict) -> None:
        self.step_no += 1
        self.steps.append(step)
        runs_before = len(self.bf.runs)
        try:
            self._execute(step)
        finally:
            if VERBOSE:
                print(f"  step {self.step_no}: {json.dumps(step)[:300]}")
                for r in self.bf.runs[runs_before:]:
                    last = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
                    print(f"      bf {' '.join(r.args)[:80]} -> {r.code}: {last[0][:160]}")

    def _execute(self, step: dict) -> None:
        op = step["op"]
        if op == "plan":
            self.do_plan(step)
        elif op == "apply":
            self.do_apply(step)
        elif op == "rollback":
            self.do_rollback(step)
        elif op == "writer":
            self.do_writer(step["w"])
        elif op == "gaps":
            self.do_gaps(step)
        else:
            raise ValueError(f"unknown step {op}")
        self.absorb({})

    def violation(self, kind: str, detail: str) -> None:
        """Raise, unless `kind` is known: then note it, bring the model to the table, and go on."""
        if kind in self.known:
            self.noted.append({"kind": kind, "step": self.step_no, "detail": detail[:2000]})
            self.resync()
            return
        raise Violation(kind, detail)

    def resync(self) -> None:
        """After a known violation: the table as it is becomes what the model expects."""
        self.absorb({"resync": True})
        actual = {r["order_id"]: r for r in tables.read_rows(self.table)}
        v = deltalog.latest_version(self.table)
        for k in set(actual) | set(self.model.rows()):
            a = actual.get(k)
            m = self.model.rows().get(k)
            if a is None and m is not None:
                self.model.set(k, None, "resync", v, self.step_no)
            elif a is not None and (m is None or invariants.row_key(a, self.model.columns()) !=
                                    invariants.row_key(m, self.model.columns())):
                self.model.set(k, {c: a.get(c) for c in self.model.columns()}, "resync", v, self.step_no)
        self.model.snap(v)

    # --- plans --------------------------------------------------------------------------------
    def plan_text(self, plan: PlanRec) -> str:
        spec = plan.spec
        amount = "DECIMAL(10,2)" if self.shape.amount == "decimal" else "DOUBLE"
        extra = "".join(f", CAST(NULL AS VARCHAR) AS {c}" for c in self.model.extra)
        query = (f"SELECT CAST(order_id AS BIGINT) AS order_id, CAST(day AS DATE) AS day, "
                 f"CAST(amount AS {amount}) AS amount, CAST(country AS VARCHAR) AS country{extra} FROM fixed")
        fmt = spec["format"]
        lines = [
            f'reason = "Simulated backfill {plan.n}: corrections for {spec["window"][0]}..{spec["window"][1]}."',
            "", "[target]", 'table = "../../orders"', 'date_column = "day"', 'key = ["order_id"]',
            "", "[window]", f"start = {spec['window'][0]}", f"end = {spec['window'][1]}",
            "", "[slicing]", f'every = "{spec["every"]}"',
        ]
        if spec.get("only"):
            lines.append("only = [" + ", ".join(spec["only"]) + "]")
        lines += ["", "[source]", f'inputs.fixed = {{ path = "fixed.{fmt}", format = "{fmt}" }}',
                  f'query = "{query}"']
        if spec["mode"] == "merge":
            lines += ["", "[write]", 'mode = "merge"']
            if spec.get("delete_missing"):
                lines.append("delete_missing = true")
        if spec.get("allow_empty"):
            lines += ["", "[guards]", "allow_empty_slices = true"]
        lines += ["", "[rehearsal]", f'table = "../../rh/p{plan.n}"', ""]
        return "\n".join(lines)

    def do_plan(self, step: dict) -> None:
        n = step["plan"]
        if n not in self.plans:
            folder = os.path.join(self.work, "plans", f"p{n}")
            os.makedirs(folder)
            self.plans[n] = PlanRec(n, folder, step["spec"])
        plan = self.plans[n]
        self.last_planned = n
        with open(os.path.join(plan.folder, "plan.toml"), "w") as f:
            f.write(self.plan_text(plan))
        sl = self.bf.run(plan.folder, ["slices", "plan.toml", "--json"])
        self.judge_exit(sl)
        if sl.code != 0:
            self.warnings.append(f"bf slices refused plan {n}: {sl.summary()}")
            return
        slices = [(s["index"], day(s["first"]), day(s["last"])) for s in json.loads(sl.stdout)["slices"]]
        plan.slices = slices
        rng = random.Random(step["seed"])
        plan.corrections = self.corrections(plan, slices, rng)
        self.write_corrections(plan)
        r = self.bf.run(plan.folder, ["plan", "plan.toml"])
        self.judge_exit(r)
        saved_path = os.path.join(plan.folder, ".bf", "plan.json")
        if not os.path.exists(saved_path):
            plan.saved = None
            return
        with open(saved_path) as f:
            saved = json.load(f)
        if plan.saved is not None and saved["id"] == plan.saved["id"]:
            if r.code != 0:
                return  # refused before saving: the old saved plan stays
        plan.saved = saved
        state = {"corrections": list(plan.corrections), "slices": list(slices), "spec": dict(plan.spec),
                 "pre_version": saved["target"]["pre_version"], "n": n}
        self.plan_ids[saved["id"]] = (plan, state)
        if r.code == 0 and not saved.get("problems"):
            invariants.check_plan_statements(self, plan, saved, state)

    def corrections(self, plan: PlanRec, slices, rng: random.Random) -> list[dict]:
        spec = plan.spec
        covered = set()
        for _, first, last in slices:
            covered.update(days_between(first, last))
        rows = self.model.rows()
        out = []
        for d in sorted(covered):
            if rng.random() < spec.get("drop_day", 0.0):
                continue
            for k, r in sorted(rows.items()):
                if r["day"] != d:
                    continue
                x = rng.random()
                if x < 0.35:
                    if spec["mode"] == "replace" or rng.random() < 0.3:
                        out.append(self.plain(r))
                elif x < 0.85:
                    new = self.plain(r)
                    new["amount"] = tables.amount_value(rng.randint(100, 99999), self.shape)
                    new["country"] = rng.choice(COUNTRIES)
                    out.append(new)
                # else: left out (replace: deleted; merge: kept, or deleted with delete_missing)
            for _ in range(rng.choices([0, 1, 2], [0.6, 0.3, 0.1])[0]):
                out.append({"order_id": self.take_id(), "day": d,
                            "amount": tables.amount_value(rng.randint(100, 99999), self.shape),
                            "country": rng.choice(COUNTRIES)})
        return out

    def plain(self, r: dict) -> dict:
        return {"order_id": r["order_id"], "day": r["day"], "amount": r["amount"], "country": r["country"]}

    def take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def write_corrections(self, plan: PlanRec) -> None:
        fmt = plan.spec["format"]
        path = os.path.join(plan.folder, f"fixed.{fmt}")
        if fmt == "csv":
            with open(path, "w") as f:
                f.write("order_id,day,amount,country\n")
                for r in plan.corrections:
                    amount = f"{r['amount']:.2f}" if self.shape.amount == "decimal" else repr(r["amount"])
                    f.write(f"{r['order_id']},{r['day'].isoformat()},{amount},{r['country']}\n")
        else:
            import pyarrow.parquet as pq

            pq.write_table(tables.to_arrow(plan.corrections, self.shape, []), path)

    # --- applies ------------------------------------------------------------------------------
    def do_apply(self, step: dict, nested: bool = False) -> None:
        plan = self.plans.get(step["plan"])
        if plan is None:
            return
        args = ["apply", "--auto-approve"]
        if step.get("how") == "recompute":
            args.append("--recompute")
        elif step.get("how") == "rerun":
            args += ["--rerun", "all"]
        before = deltalog.latest_version(self.table)
        pause = step.get("pause")
        fault = step.get("fault")
        if not nested:
            self.others_during = False
        if pause and not nested:
            r, paused = self.bf.run_paused(plan.folder, args, pause.get("slice"), pause["point"],
                                           lambda: self.run_during(pause["during"]))
        else:
            r = self.bf.run(plan.folder, args, fault=fault)
        self.absorb({})
        self.judge_exit(r)
        if r.crashed_on_purpose:
            invariants.check_crash_landing(self, plan, fault, before)
            resume = [a for a in args if a not in ("--rerun", "all")]
            r = self.bf.run(plan.folder, resume)
            self.absorb({})
            self.judge_exit(r)
        if plan.saved is not None and invariants.committed_since(self, plan.saved["id"], before):
            self.last_applied = plan.n
        invariants.judge_apply(self, plan, r, before)

    def run_during(self, during: list[dict]) -> None:
        self.others_during = bool(during)
        for sub in during:
            if sub["op"] == "writer":
                self.do_writer(sub["w"])
            elif sub["op"] == "rollback":
                self.do_rollback(sub, nested=True)
            elif sub["op"] == "apply":
                self.do_apply(sub, nested=True)

    # --- rollbacks ----------------------------------------------------------------------------
    def resolve_backfill(self, ordinal) -> Backfill | None:
        if ordinal is None or not self.backfill_order:
            return None
        return self.backfills[self.backfill_order[ordinal % len(self.backfill_order)]]

    def do_rollback(self, step: dict, nested: bool = False) -> None:
        plan = self.plans.get(step["plan"])
        if plan is None:
            return
        args = ["rollback"]
        how = step["how"]
        target = self.resolve_backfill(step.get("backfill"))
        if how == "to-version":
            versions = sorted(self.model.snapshots)
            n = versions[step.get("to_version", 0) % len(versions)]
            args += ["--to-version", str(n), "--table", "../../orders"]
        elif target is not None:
            args += ["--table", "../../orders", "--backfill", target.id]
        if how in ("window", "window-force"):
            args.append("--window-only")
        if how == "window-force":
            args.append("--force")
        ctx = {"force": how == "window-force"}
        prompt = step.get("prompt")
        if prompt and not nested:
            r, asked = self.bf.run_at_prompt(plan.folder, args, lambda: self.run_during(prompt["during"]))
        else:
            r = self.bf.run(plan.folder, args + ["--auto-approve"], fault=step.get("fault"))
        self.absorb(ctx)
        self.judge_exit(r)
        if r.crashed_on_purpose:
            r = self.bf.run(plan.folder, args + ["--auto-approve"])
            self.absorb(ctx)
            self.judge_exit(r)
        invariants.judge_rollback(self, plan, step, r, target)

    # --- other writers ------------------------------------------------------------------------
    def do_writer(self, op: dict) -> None:
        for r in op.get("rows", []):  # ids drawn when the step was made: never handed out again
            self.next_id = max(self.next_id, r["order_id"] + 1)
        self.absorb({})
        try:
            effect = writers.run(self.table, self.shape, self.model.extra, self.model.rows(), op)
        except Exception as error:  # the other writer failed: not bf's doing, but say so
            self.warnings.append(f"step {self.step_no}: writer {op['op']} failed: {str(error)[:300]}")
            v = deltalog.latest_version(self.table)
            for ver in range(self.model.absorbed + 1, v + 1):
                self.model.journal.append(Commit(ver, "other", op["op"], self.step_no, data_change=True,
                                                 metadata=True))
            self.resync()
            return
        kind = op["op"]
        for v in range(effect.version_before + 1, effect.version_after + 1):
            actions = deltalog.read_commit(self.table, v) or []
            data_change = any(a.get(k, {}).get("dataChange") for a in actions for k in ("add", "remove"))
            self.model.journal.append(Commit(
                v, "other", kind, self.step_no, data_change=data_change or bool(effect.changes),
                metadata=any("metaData" in a or "protocol" in a for a in actions),
                maintenance=kind in writers.MAINTENANCE, days=frozenset(effect.days())))
        for c in effect.new_columns:
            self.model.add_column(c)
        for k, (old, new) in effect.changes.items():
            self.model.set(k, new, "other", effect.version_after, self.step_no,
                           keep_rid=kind in ("update", "merge") and old is not None and new is not None)
        self.model.snap(max(effect.version_after, self.model.absorbed))

    def do_gaps(self, step: dict) -> None:
        args = ["gaps", "orders", "--date-column", "day", "--from", step["from"], "--to", step["to"]]
        text = self.bf.run(self.work, args)
        self.judge_exit(text)
        js = self.bf.run(self.work, args + ["--json"])
        self.judge_exit(js)
        invariants.check_gaps(self, step, text, js)

    # --- bf's commits, read from the log ------------------------------------------------------
    def absorb(self, ctx: dict) -> None:
        latest = deltalog.latest_version(self.table)
        for v in range(self.model.absorbed + 1, latest + 1):
            actions = deltalog.read_commit(self.table, v)
            if actions is None:
                self.warnings.append(f"version {v} cannot be read from the log")
                self.model.snap(v)
                continue
            info = deltalog.commit_info(actions)
            if not any(k.startswith("bf.") for k in info):
                if not ctx.get("resync"):
                    self.warnings.append(f"version {v}: a commit the simulation did not make ({info.get('operation')})")
                self.model.journal.append(Commit(v, "other", str(info.get("operation")), self.step_no,
                                                 data_change=True, metadata=True))
                self.model.snap(v)
                continue
            self.absorb_bf(v, info, actions, ctx)
            self.model.snap(v)

    def absorb_bf(self, v: int, info: dict, actions: list[dict], ctx: dict) -> None:
        op = info.get("operation", "")
        has_metadata = any("metaData" in a for a in actions)
        data = any(("add" in a or "remove" in a) for a in actions)
        if "bf.backfill_id" in info and "bf.slice" in info and "bf.rollback_of" not in info:
            self.absorb_slice(v, info, ctx)
        elif "bf.backfill_id" in info and info.get("bf.comment"):
            self.model.journal.append(Commit(v, "bf", "comment", self.step_no, metadata=True,
                                             plan_id=info.get("bf.plan_id"), backfill_id=info["bf.backfill_id"]))
        elif op == "RESTORE":
            self.absorb_restore(v, info, ctx)
        elif "bf.rollback_of" in info and data:
            self.absorb_rollback_slice(v, info, ctx)
        elif "bf.rollback_of" in info:
            self.model.journal.append(Commit(v, "bf", "rollback-comment", self.step_no, metadata=has_metadata,
                                             rollback_of=info["bf.rollback_of"]))
        else:
            self.model.journal.append(Commit(v, "bf", "other:" + op, self.step_no, metadata=has_metadata,
                                             data_change=data))

    def watched(self, bf_plan: dict, first: dt.date, last: dt.date) -> tuple[dt.date, dt.date]:
        if bf_plan["spec"].get("only"):
            return day(bf_plan["spec"]["window"][0]), day(bf_plan["spec"]["window"][1])
        return first, last

    def absorb_slice(self, v: int, info: dict, ctx: dict) -> None:
        plan_id = info["bf.plan_id"]
        bid = info["bf.backfill_id"]
        k = int(info["bf.slice"])
        first, last = day(info["bf.slice_first"]), day(info["bf.slice_last"])
        known = self.plan_ids.get(plan_id)
        if known is None:
            raise RuntimeError(f"version {v}: a slice of plan {plan_id}, which this history never planned")
        plan, state = known
        if bid not in self.backfills:
            self.backfills[bid] = Backfill(bid, plan_id, int(info["bf.pre_version"]), plan.window,
                                           bool(state["spec"].get("only")), plan.n)
            self.backfill_order.append(bid)
        b = self.backfills[bid]
        b.slices[k] = (v, first, last)
        b.first_version = v if b.first_version is None else min(b.first_version, v)
        # The plan's rule (README "The table is live", docs/RELIABILITY.md "The staleness rule"): a
        # commit since the plan that is not this plan's own and changes the table's metadata, or
        # changes rows of the slice's days (of the whole window for `[slicing] only`), makes the
        # slice stale: it is never committed.
        w_first, w_last = self.watched(state, first, last)
        blockers = []
        for c in self.model.since(state["pre_version"], v):
            if c.plan_id == plan_id and c.kind in ("slice", "comment"):
                continue
            if c.who == "bf" and c.kind in ("comment", "rollback-comment"):
                continue  # another backfill's comment is neither (README)
            if c.metadata and not c.maintenance:
                blockers.append(c)
            elif c.data_change and any(w_first <= d <= w_last for d in c.days):
                blockers.append(c)
        self.model.journal.append(Commit(v, "bf", "slice", self.step_no, data_change=True,
                                         days=frozenset(days_between(first, last)), plan_id=plan_id,
                                         backfill_id=bid))
        if blockers:
            listed = "\n".join(f"  version {c.version}: {c.kind} by {c.who} (step {c.step}), days "
                               f"{sorted(d.isoformat() for d in c.days)[:6]}" for c in blockers)
            self.violation("stale-slice-committed",
                           f"slice {k} ({first}..{last}) of backfill {bid} committed at version {v}, though "
                           f"since its plan (version {state['pre_version']}) other commits changed "
                           f"{'the window' if state['spec'].get('only') else 'its days'} or the table:\n{listed}")
        self.apply_slice_rows(v, bid, state, first, last)

    def apply_slice_rows(self, v: int, bid: str, state: dict, first: dt.date, last: dt.date) -> None:
        spec = state["spec"]
        source = {r["order_id"]: r for r in state["corrections"] if first <= r["day"] <= last}
        current = self.model.rows_on(first, last)
        writer = f"bf:{bid}"
        if spec["mode"] == "replace":
            for k in current:
                if k not in source:
                    self.model.set(k, None, writer, v, self.step_no)
            for k, r in source.items():
                self.model.set(k, dict(r), writer, v, self.step_no)
        else:
            for k, r in current.items():
                if k not in source and spec.get("delete_missing"):
                    self.model.set(k, None, writer, v, self.step_no)
            for k, r in source.items():
                row = dict(r)
                if self.shape.identity and k in current:
                    row["seq"] = current[k].get("seq")  # a merge's update keeps its row's value (README)
                self.model.set(k, row, writer, v, self.step_no, keep_rid=k in current)

    def lost_by_restore(self, target_entries: dict, days: tuple | None, exempt: str) -> list[str]:
        """The keys whose current row another writer (not `exempt`) left and a rollback to
        `target_entries` (on `days`, or the whole table) would not keep."""
        lost = []
        for k in set(self.model.entries) | set(target_entries):
            now = self.model.entries.get(k)
            then = target_entries.get(k)
            rows = [e.row for e in (now, then) if e is not None and e.row is not None]
            if days is not None and not any(days[0] <= r["day"] <= days[1] for r in rows):
                continue
            if now is None or now is then:
                continue
            same = (now.row is None and (then is None or then.row is None)) or (
                now.row is not None and then is not None and then.row is not None
                and invariants.row_key(now.row, self.model.columns())
                == invariants.row_key(then.row, self.model.columns()))
            if same:
                continue
            if now.writer in (exempt, "init"):
                continue
            if now.writer.startswith("rollback:") or now.writer == "restore":
                continue
            lost.append(f"order {k}: {now.describe()}")
        return lost

    def absorb_restore(self, v: int, info: dict, ctx: dict) -> None:
        target = info.get("bf.rollback_to", info.get("bf.pre_version"))
        if target is None:
            target = int((info.get("operationParameters") or {}).get("version"))
        target = int(target)
        snap = self.model.at(target)
        bid = info.get("bf.rollback_of")
        self.model.journal.append(Commit(v, "bf", "restore", self.step_no, data_change=True, metadata=True,
                                         rollback_of=bid))
        if snap is None:
            self.warnings.append(f"version {v}: RESTORE of version {target}, before this history's first")
            return
        entries, extra = snap
        self.learn_identity(entries, target)
        if bid is not None:
            lost = self.lost_by_restore(entries, None, f"bf:{bid}")
            added = [c for c in self.model.extra if c not in extra]
            if lost or added:
                self.violation("rollback-discarded-others-work",
                               f"version {v}: the RESTORE of version {target} (rollback of backfill {bid}) discards "
                               f"work other writers did since:\n  " + "\n  ".join(lost[:12])
                               + (f"\n  columns added since: {added}" if added else ""))
        self.model.entries = {k: e for k, e in entries.items()}
        self.model.extra = list(extra)

    def learn_identity(self, entries: dict, version: int) -> None:
        """The identity values of rows a rollback brings back as `version` held them, where the
        model never saw them (written and undone within one step, before any check): they come
        back with those values, not new ones beyond the mark."""
        unseen = [k for k, e in entries.items() if e.row is not None and "seq" not in e.row]
        if not self.shape.identity or not unseen:
            return
        held = {r["order_id"]: r.get("seq") for r in tables.read_rows(self.table, at=version)}
        for k in unseen:
            if k in held:
                entries[k].row["seq"] = held[k]

    def absorb_rollback_slice(self, v: int, info: dict, ctx: dict) -> None:
        bid = info["bf.rollback_of"]
        pre = int(info["bf.pre_version"])
        first, last = day(info["bf.slice_first"]), day(info["bf.slice_last"])
        self.model.journal.append(Commit(v, "bf", "rollback-slice", self.step_no, data_change=True,
                                         days=frozenset(days_between(first, last)), rollback_of=bid))
        snap = self.model.at(pre)
        if snap is None:
            self.warnings.append(f"version {v}: a window rollback to version {pre}, before this history's first")
            return
        entries, _ = snap
        self.learn_identity(entries, pre)
        if not ctx.get("force"):
            lost = self.lost_by_restore(entries, (first, last), f"bf:{bid}")
            if lost:
                self.violation("rollback-discarded-others-work",
                               f"version {v}: the window-only rollback of backfill {bid} puts back {first}..{last} "
                               f"as version {pre} held it, over work other writers did since:\n  "
                               + "\n  ".join(lost[:12]))
        for k in list(self.model.entries):
            e = self.model.entries[k]
            if e.row is not None and first <= e.row["day"] <= last:
                then = entries.get(k)
                if then is None or then.row is None or not (first <= then.row["day"] <= last):
                    self.model.set(k, None, f"rollback:{bid}", v, self.step_no)
        for k, e in entries.items():
            if e.row is not None and first <= e.row["day"] <= last:
                self.model.entries[k] = e

    # --- judging a run ------------------------------------------------------------------------
    def judge_exit(self, r: Run) -> None:
        if r.panicked():
            self.violation("panic", r.summary())
        elif r.code is None:
            self.violation("hang", r.summary())
        elif r.code not in (0, 1) and not r.crashed_on_purpose:
            self.violation("unclean-exit", r.summary())
        elif r.code == 1 and not (r.stderr.strip() or r.stdout.strip()):
            self.violation("silent-refusal", r.summary())

    def check(self) -> None:
        invariants.check_all(self)


# --- the generator ----------------------------------------------------------------------------

SHAPES = st.builds(
    Shape,
    partitioned=st.booleans(),
    amount=st.sampled_from(["double", "decimal"]),
    cdf=st.booleans(),
    mapping=st.sampled_from([None, None, "name", "id"]),
    deletion_vectors=st.sampled_from([False, False, True]),
    checkpoint_interval=st.sampled_from([None, None, 2, 5]),
    row_tracking=st.sampled_from([False, False, False, True]),
    identity=st.sampled_from([False, False, False, True]),
).map(lambda s: Shape(**{**s.to_json(), "deletion_vectors": s.deletion_vectors and not s.mapping}))
# deltalake 1.6.6 makes a table with column mapping and deletion vectors at writer version 7 without
# naming `columnMapping` among its features: DuckDB (rightly) refuses it, so the pair is not drawn.

BINARY = None  # set by simulate.py
VERBOSE = False
KNOWN: set[str] = set()
LAST: dict = {}  # the latest history run: its Sim (for the shrunk example's steps)


class Machine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.sim = Sim(BINARY, KNOWN)
        LAST["sim"] = self.sim

    def teardown(self):
        self.sim.close()

    @initialize(shape=SHAPES, seed=st.integers(0, 2**16))
    def init(self, shape, seed):
        self.sim.init(shape, seed)

    # --- what the steps draw -------------------------------------------------------------------
    def _plan_choice(self, data, prefer: int | None = None):
        """A plan folder: `prefer` (the one planned or applied last) more often than the others."""
        if prefer in self.sim.plans and data.draw(st.integers(0, 3), label="the latest plan?") > 0:
            return prefer
        return data.draw(st.sampled_from(sorted(self.sim.plans)), label="plan")

    def _window(self, data):
        every = data.draw(st.sampled_from(EVERY), label="every")
        span = {"day": 5, "week": 30, "month": 60, "3 days": 15, "7 days": 35, "10 days": 50}[every]
        start = data.draw(st.integers(0, DAYS - 1), label="start")
        length = data.draw(st.integers(1, span), label="length")
        first = FIRST_DAY + dt.timedelta(days=start)
        last = min(LAST_DAY, first + dt.timedelta(days=length - 1))
        return every, first, last

    def _writer_op(self, data, kind=None, near: tuple | None = None) -> dict:
        ops = RAW_WRITER_OPS if self.sim.shape.raw_writers else WRITER_OPS
        kind = kind or data.draw(st.sampled_from(ops), label="writer")
        seed = data.draw(st.integers(0, 2**16), label="writer seed")
        return self.sim_writer_op(kind, seed, near)

    def sim_writer_op(self, kind: str, seed: int, near: tuple | None) -> dict:
        sim = self.sim
        rng = random.Random(seed)
        rows = sim.model.rows()
        windows = [p.window for p in sim.plans.values()]
        if near is None and windows:
            near = rng.choice(windows)

        def a_day(inside: bool) -> dt.date:
            if near and inside:
                return near[0] + dt.timedelta(days=rng.randint(0, (near[1] - near[0]).days))
            for _ in range(50):
                d = FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS))
                if not near or not (near[0] <= d <= near[1]):
                    return d
            return FIRST_DAY

        def new_row(d: dt.date) -> dict:
            spec = {"order_id": sim.take_id(), "day": d.isoformat(), "cents": rng.randint(100, 99999),
                    "country": rng.choice(COUNTRIES)}
            for c in sim.model.extra:
                spec[c] = rng.choice([None, "x"])
            return spec

        def some_ids(inside: bool) -> list[int]:
            pool = [k for k, r in rows.items() if near and (near[0] <= r["day"] <= near[1]) == inside] or list(rows)
            return sorted(rng.sample(pool, min(len(pool), rng.randint(1, 3)))) if pool else []

        inside = rng.random() < 0.4
        if kind == "append_in":
            return {"op": "append", "rows": [new_row(a_day(True)) for _ in range(rng.randint(1, 3))]}
        if kind == "append_out":
            return {"op": "append", "rows": [new_row(a_day(False)) for _ in range(rng.randint(1, 3))]}
        if kind == "delete":
            return {"op": "delete", "ids": some_ids(inside)}
        if kind == "update":
            return {"op": "update", "ids": some_ids(inside)}
        if kind == "merge":
            changed = []
            for k in some_ids(inside):
                spec = writers.row_spec(rows[k], sim.shape)
                spec["cents"] = rng.randint(100, 99999)
                changed.append(spec)
            return {"op": "merge", "rows": changed + [new_row(a_day(inside))]}
        if kind == "overwrite_day":
            d = a_day(inside)
            return {"op": "overwrite_day", "day": d.isoformat(),
                    "rows": [new_row(d) for _ in range(rng.randint(0, 2))]}
        if kind == "add_column":
            return {"op": "add_column", "name": f"note_{len(sim.model.extra) + 1}_{rng.randint(0, 999)}"}
        if kind == "set_property":
            key, value = rng.choice([("sim.owner", f"team-{rng.randint(0, 9)}"),
                                     ("delta.logRetentionDuration", "interval 0 hours"),
                                     ("delta.deletedFileRetentionDuration", "interval 0 hours"),
                                     ("delta.logRetentionDuration", "interval 30 days")])
            return {"op": "set_property", "key": key, "value": value}
        if kind == "description":
            return {"op": "description", "text": f"orders, owned by team {rng.randint(0, 9)}"}
        return {"op": kind}

    # --- the one rule: a step, its kind drawn by weight --------------------------------------
    # One rule rather than one per kind: Hypothesis's swarm testing turns a random subset of rules off
    # in each history, and a history without `apply` or `rollback` tests little.
    KINDS = ["plan"] * 14 + ["replan"] * 6 + ["apply"] * 28 + ["rollback"] * 22 + ["writer"] * 24 + ["gaps"] * 6

    @rule(data=st.data())
    def step(self, data):
        kind = data.draw(st.sampled_from(self.KINDS), label="step")
        if kind in ("replan", "apply", "rollback") and not self.sim.plans:
            kind = "plan"
        if kind == "plan" and len(self.sim.plans) >= 3:
            kind = "replan"
        getattr(self, "_" + kind)(data)

    def _plan(self, data):
        every, first, last = self._window(data)
        only = None
        if data.draw(st.integers(0, 4), label="only?") == 0 and (last - first).days >= 2:
            picks = data.draw(st.lists(st.integers(0, (last - first).days), min_size=1, max_size=3, unique=True),
                              label="only days")
            only = sorted((first + dt.timedelta(days=i)).isoformat() for i in picks)
        mode = data.draw(st.sampled_from(["replace", "replace", "merge"]), label="mode")
        spec = {"window": [first.isoformat(), last.isoformat()], "every": every, "only": only, "mode": mode,
                "delete_missing": mode == "merge" and data.draw(st.booleans(), label="delete_missing"),
                "format": data.draw(st.sampled_from(["csv", "parquet"]), label="format"),
                "allow_empty": data.draw(st.integers(0, 3), label="allow_empty?") == 0,
                "drop_day": data.draw(st.sampled_from([0.0, 0.0, 0.15, 0.5]), label="drop_day")}
        n = len(self.sim.plans) + 1
        self.sim.execute({"op": "plan", "plan": n, "spec": spec,
                          "seed": data.draw(st.integers(0, 2**16), label="seed")})

    def _replan(self, data):
        n = self._plan_choice(data)
        self.sim.execute({"op": "plan", "plan": n, "spec": self.sim.plans[n].spec,
                          "seed": data.draw(st.integers(0, 2**16), label="seed")})

    def _apply(self, data):
        n = self._plan_choice(data, self.sim.last_planned)
        plan = self.sim.plans[n]
        how = data.draw(st.sampled_from(["plain", "plain", "plain", "recompute", "rerun"]), label="how")
        variant = data.draw(st.sampled_from(["none", "fault", "pause", "pause"]), label="variant")
        step = {"op": "apply", "plan": n, "how": how}
        count = max(1, len(plan.slices))
        if variant == "fault":
            point = data.draw(st.sampled_from(APPLY_FAULTS), label="fault")
            k = data.draw(st.integers(1, count), label="slice")
            step["fault"] = point if point == "before-comment" else f"{point}:{k}"
        elif variant == "pause":
            point = data.draw(st.sampled_from(["before", "before", "after-check", "before-comment"]), label="point")
            k = data.draw(st.integers(1, count), label="slice")
            step["pause"] = {"slice": None if point == "before-comment" else k, "point": point,
                             "during": self._during(data)}
        self.sim.execute(step)

    def _during(self, data, prompt: bool = False) -> list[dict]:
        """What others do while bf waits: writers, and — where users can — another bf command."""
        out = []
        kinds = ["rollback", "rollback", "writer", "writer", "apply"] if prompt else \
            ["writer", "writer", "writer", "rollback", "apply"]
        for _ in range(data.draw(st.integers(1, 2), label="during")):
            what = data.draw(st.sampled_from(kinds), label="during what")
            if what == "writer" or not self.sim.plans:
                out.append({"op": "writer", "w": self._writer_op(data)})
            elif what == "rollback":
                out.append(self._rollback_step(data, nested=True))
            else:
                out.append({"op": "apply", "plan": self._plan_choice(data), "how": "plain"})
        return out

    def _rollback_step(self, data, nested=False) -> dict:
        n = self._plan_choice(data, self.sim.last_applied)
        how = data.draw(st.sampled_from(["full", "full", "window", "window", "window-force", "to-version"]),
                        label="rollback")
        step = {"op": "rollback", "plan": n, "how": how}
        if data.draw(st.integers(0, 2), label="named backfill?") == 0:
            step["backfill"] = data.draw(st.integers(0, 5), label="backfill")
        if how == "to-version":
            step["to_version"] = data.draw(st.integers(0, 50), label="to version")
        if not nested:
            variant = data.draw(st.sampled_from(["none", "none", "fault", "prompt"]), label="variant")
            if variant == "fault":
                point = data.draw(st.sampled_from(ROLLBACK_FAULTS), label="fault")
                k = data.draw(st.integers(1, 3), label="slice")
                step["fault"] = point if point in ROLLBACK_FAULTS[:2] else f"{point}:{k}"
            elif variant == "prompt":
                step["prompt"] = {"during": self._during(data, prompt=True)}
        return step

    def _rollback(self, data):
        self.sim.execute(self._rollback_step(data))

    def _writer(self, data):
        self.sim.execute({"op": "writer", "w": self._writer_op(data)})

    def _gaps(self, data):
        start = data.draw(st.integers(-20, DAYS - 1), label="gaps start")
        length = data.draw(st.integers(1, 60), label="gaps length")
        first = FIRST_DAY + dt.timedelta(days=start)
        self.sim.execute({"op": "gaps", "from": first.isoformat(),
                          "to": (first + dt.timedelta(days=length - 1)).isoformat()})

    @invariant()
    def holds(self):
        if self.sim.work is not None:
            self.sim.check()

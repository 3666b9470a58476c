"""Other writers: what the daily job, a data engineer and the table's maintenance do to the table
between bf's steps and inside its pause points. Each operation is concrete (its rows and ids are in
the step, so a history replays), runs against the real table and returns what it changed, row by
row, for the model.

On the shapes the Python package can write, it writes (append, DELETE, UPDATE, MERGE, an overwrite
of one day by predicate, OPTIMIZE, VACUUM, ADD COLUMN, a property, the description, a checkpoint and
log cleanup). On the shapes it refuses (row tracking with in-commit timestamps), the writer commits
by hand from PROTOCOL.md: appends, deletes and updates that rewrite a file keeping every other row's
id (materialized), ADD COLUMN and a property, each with an in-commit timestamp after the last.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import urllib.parse
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Field, write_deltalake

import deltalog
import tables
from tables import Shape

# What each operation is, for the model: does it change rows, the table's metadata, or neither.
MAINTENANCE = {"optimize", "vacuum", "checkpoint", "cleanup"}
METADATA = {"add_column", "set_property", "description"}


class Effect:
    def __init__(self, kind: str, version_before: int, version_after: int):
        self.kind = kind
        self.version_before = version_before
        self.version_after = version_after
        # key -> (old row or None, new row or None)
        self.changes: dict[int, tuple[dict | None, dict | None]] = {}
        self.metadata = kind in METADATA
        self.new_columns: list[str] = []

    @property
    def committed(self) -> bool:
        return self.version_after > self.version_before

    def days(self) -> set[dt.date]:
        out = set()
        for old, new in self.changes.values():
            for r in (old, new):
                if r is not None:
                    out.add(r["day"])
        return out


def _sql_day(day: dt.date) -> str:
    return f"'{day.isoformat()}'"


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


def plus_one(row: dict, shape: Shape) -> dict:
    new = dict(row)
    if shape.amount == "decimal":
        new["amount"] = row["amount"] + 1
    else:
        new["amount"] = row["amount"] + 1.0
    new["country"] = "UPD"
    return new


def run(path: str, shape: Shape, extra: list[str], rows: dict[int, dict], op: dict) -> Effect:
    """Runs `op` on the table at `path`, whose rows the model says are `rows`."""
    before = deltalog.latest_version(path)
    if shape.raw_writers:
        effect = Effect(op["op"], before, before)
        _run_raw(path, shape, extra, rows, op, effect)
    else:
        effect = Effect(op["op"], before, before)
        _run_deltalake(path, shape, extra, rows, op, effect)
    effect.version_after = deltalog.latest_version(path)
    return effect


def _run_deltalake(path, shape, extra, rows, op, effect: Effect) -> None:
    kind = op["op"]
    table = DeltaTable(path)
    if kind == "append":
        new = [_row(r, shape) for r in op["rows"]]
        write_deltalake(path, tables.to_arrow(new, shape, extra), mode="append")
        for r in new:
            effect.changes[r["order_id"]] = (rows.get(r["order_id"]), r)
    elif kind == "delete":
        ids = [i for i in op["ids"]]
        table.delete(f"order_id IN ({_ids(ids)})")
        for i in ids:
            if i in rows:
                effect.changes[i] = (rows[i], None)
    elif kind == "update":
        ids = op["ids"]
        table.update(
            updates={"amount": "amount + 1", "country": "'UPD'"}, predicate=f"order_id IN ({_ids(ids)})"
        )
        for i in ids:
            if i in rows:
                effect.changes[i] = (rows[i], plus_one(rows[i], shape))
    elif kind == "merge":
        new = [_row(r, shape) for r in op["rows"]]
        source = tables.to_arrow(new, shape, extra)
        (
            table.merge(source, predicate="t.order_id = s.order_id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        for r in new:
            effect.changes[r["order_id"]] = (rows.get(r["order_id"]), r)
    elif kind == "overwrite_day":
        day = dt.date.fromisoformat(op["day"])
        new = [_row(r, shape) for r in op["rows"]]
        write_deltalake(
            path, tables.to_arrow(new, shape, extra), mode="overwrite", predicate=f"day = {_sql_day(day)}"
        )
        for k, r in rows.items():
            if r["day"] == day:
                effect.changes[k] = (r, None)
        for r in new:
            effect.changes[r["order_id"]] = (rows.get(r["order_id"]), r)
    elif kind == "optimize":
        table.optimize.compact()
    elif kind == "vacuum":
        table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    elif kind == "add_column":
        table.alter.add_columns([Field(op["name"], "string", nullable=True)])
        effect.new_columns.append(op["name"])
    elif kind == "set_property":
        table.alter.set_table_properties({op["key"]: op["value"]}, raise_if_not_exists=False)
    elif kind == "description":
        table.alter.set_table_description(op["text"])
    elif kind == "checkpoint":
        table.create_checkpoint()
    elif kind == "cleanup":
        table.cleanup_metadata()
    else:
        raise ValueError(f"unknown writer operation {kind}")


def _row(spec: dict, shape: Shape) -> dict:
    """A row of the step (JSON: the day as text, the amount in cents) as the table holds it."""
    row = {k: v for k, v in spec.items() if k not in ("day", "cents")}
    row["day"] = dt.date.fromisoformat(spec["day"])
    row["amount"] = tables.amount_value(spec["cents"], shape)
    return row


def row_spec(row: dict, shape: Shape) -> dict:
    """The inverse of `_row`: a row as a step holds it."""
    spec = {k: v for k, v in row.items() if k not in ("day", "amount")}
    spec["day"] = row["day"].isoformat()
    amount = row["amount"]
    spec["cents"] = int(round(float(amount) * 100))
    return spec


# --- by hand, from PROTOCOL.md --------------------------------------------------------------------


def _ict_and_mark(snap: deltalog.Snapshot, path: str) -> tuple[int, int]:
    last = 0
    for v in deltalog.versions(path):
        info = deltalog.commit_info(deltalog.read_commit(path, v) or [])
        last = max(last, info.get("inCommitTimestamp") or 0)
    dom = snap.domains.get("delta.rowTracking")
    mark = json.loads(dom["configuration"])["rowIdHighWaterMark"] if dom else -1
    return last, mark


def _fields(snap: deltalog.Snapshot) -> list[dict]:
    return snap.schema["fields"]


def _physical(field: dict) -> str:
    return (field.get("metadata") or {}).get("delta.columnMapping.physicalName", field["name"])


def _stats(data: pa.Table, snap: deltalog.Snapshot) -> str:
    mins, maxs, nulls = {}, {}, {}
    for f in _fields(snap):
        phys = _physical(f)
        if phys not in data.column_names:
            continue
        values = [v for v in data.column(phys).to_pylist() if v is not None]
        nulls[phys] = data.num_rows - len(values)
        if values:
            lo, hi = min(values), max(values)
            conv = (lambda v: v.isoformat()) if isinstance(lo, dt.date) else (
                (lambda v: float(v)) if not isinstance(lo, (int, str, float)) else (lambda v: v))
            mins[phys], maxs[phys] = conv(lo), conv(hi)
    return json.dumps({"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _write_file(path: str, snap: deltalog.Snapshot, shape: Shape, rows: list[dict],
                ids: list[tuple] | None) -> tuple[str, pa.Table]:
    """A Parquet file of `rows` in the table's physical names and field ids; `ids`: each row's
    (row id, commit version) to materialize, None for new rows."""
    columns, arrays = [], []
    mode = snap.configuration.get("delta.columnMapping.mode")
    for f in _fields(snap):
        if shape.partitioned and f["name"] == "day":
            continue  # a partition column's value is in the log, not the file
        phys = _physical(f)
        typ = tables.arrow_type(f["name"], shape)
        meta = None
        if mode == "id":
            meta = {b"PARQUET:field_id": str(f["metadata"]["delta.columnMapping.id"]).encode()}
        columns.append(pa.field(phys, typ, metadata=meta))
        arrays.append(pa.array([r.get(f["name"]) for r in rows], typ))
    if ids is not None:
        conf = snap.configuration
        columns.append(pa.field(conf["delta.rowTracking.materializedRowIdColumnName"], pa.int64()))
        arrays.append(pa.array([i[0] for i in ids], pa.int64()))
        columns.append(pa.field(conf["delta.rowTracking.materializedRowCommitVersionColumnName"], pa.int64()))
        arrays.append(pa.array([i[1] for i in ids], pa.int64()))
    data = pa.Table.from_arrays(arrays, schema=pa.schema(columns))
    name = f"part-00000-another-writer-{uuid.uuid4()}.parquet"
    pq.write_table(data, os.path.join(path, name))
    return name, data


def _commit_info(op: str, last_ict: int | None) -> dict:
    """The commitInfo first; with in-commit timestamps on, one after the last (PROTOCOL.md)."""
    now = int(time.time() * 1000)
    info = {"timestamp": now, "operation": op, "operationParameters": {}, "engineInfo": "another writer (by hand)"}
    if last_ict is not None:
        info = {"timestamp": now, "inCommitTimestamp": max(now, last_ict + 1), **info}
    return {"commitInfo": info}


def _run_raw(path, shape, extra, rows, op, effect: Effect) -> None:
    kind = op["op"]
    snap = deltalog.snapshot(path)
    version = snap.version + 1
    last_ict, mark = _ict_and_mark(snap, path)
    if not shape.row_tracking:
        last_ict = None
    if kind == "append":
        new = [_row(r, shape) for r in op["rows"]]
        identity = []
        if shape.identity:
            top = tables.identity_mark(snap) or 0
            for i, r in enumerate(new, 1):
                r["seq"] = top + i
            identity = [_identity_raised(snap, top + len(new))]
        groups = {}
        for r in new:
            groups.setdefault(r["day"] if shape.partitioned else None, []).append(r)
        actions, top = [], mark
        for _, part in sorted(groups.items(), key=lambda kv: str(kv[0])):
            name, data = _write_file(path, snap, shape, part, None)
            actions.append({"add": {"path": name, "partitionValues": _partition_values(snap, shape, part),
                                    "size": os.path.getsize(os.path.join(path, name)),
                                    "modificationTime": int(time.time() * 1000), "dataChange": True,
                                    "stats": _stats(data, snap), "baseRowId": top + 1,
                                    "defaultRowCommitVersion": version}})
            top += len(part)
        marks = [_mark(top)] if shape.row_tracking else []
        tables.write_commit(path, version, [_commit_info("WRITE", last_ict), *identity, *actions, *marks])
        for r in new:
            effect.changes[r["order_id"]] = (rows.get(r["order_id"]), r)
    elif kind in ("delete", "update"):
        ids = set(op["ids"])
        actions = [_commit_info(kind.upper(), last_ict)]
        top = mark
        table_ids = deltalog.row_tracking_ids(path, snap) if shape.row_tracking else {}
        for fpath, add in sorted(snap.files.items()):
            data = pq.read_table(os.path.join(path, urllib.parse.unquote(fpath)))
            in_file = _logical_rows(data, snap, add)
            keys = [r["order_id"] for r in in_file]
            if not ids.intersection(keys):
                continue
            kept, kept_ids = [], []
            for r in in_file:
                k = r["order_id"]
                if k in ids:
                    if kind == "delete":
                        effect.changes[k] = (rows.get(k), None)
                        continue
                    new_row = plus_one(r, shape)
                    effect.changes[k] = (rows.get(k), new_row)
                    kept.append(new_row)
                    kept_ids.append((table_ids.get(k, (None,))[0], None))  # an update keeps the id; new version
                else:
                    kept.append(r)
                    kept_ids.append(table_ids.get(k, (None, None)))
            actions.append({"remove": {"path": fpath, "deletionTimestamp": int(time.time() * 1000),
                                       "dataChange": True, "extendedFileMetadata": True,
                                       "partitionValues": add.get("partitionValues") or {},
                                       "size": add.get("size"), "baseRowId": add.get("baseRowId"),
                                       "defaultRowCommitVersion": add.get("defaultRowCommitVersion")}})
            if kept:
                name, written = _write_file(path, snap, shape, kept, kept_ids if shape.row_tracking else None)
                added = {"path": name, "partitionValues": add.get("partitionValues") or {},
                         "size": os.path.getsize(os.path.join(path, name)),
                         "modificationTime": int(time.time() * 1000), "dataChange": True,
                         "stats": _stats(written, snap)}
                if shape.row_tracking:
                    added.update({"baseRowId": top + 1, "defaultRowCommitVersion": version})
                actions.append({"add": added})
                top += len(kept)
        if len(actions) > 1:
            tables.write_commit(path, version, actions + ([_mark(top)] if shape.row_tracking else []))
    elif kind in ("add_column", "set_property", "description"):
        metadata = json.loads(json.dumps(snap.metadata))
        if kind == "add_column":
            schema = snap.schema
            field = {"name": op["name"], "type": "string", "nullable": True, "metadata": {}}
            conf = metadata.setdefault("configuration", {})
            if conf.get("delta.columnMapping.mode"):
                top_id = int(conf.get("delta.columnMapping.maxColumnId", "0")) + 1
                field["metadata"] = {"delta.columnMapping.id": top_id,
                                     "delta.columnMapping.physicalName": f"col-{uuid.uuid4()}"}
                conf["delta.columnMapping.maxColumnId"] = str(top_id)
            schema["fields"].append(field)
            metadata["schemaString"] = json.dumps(schema)
            effect.new_columns.append(op["name"])
        elif kind == "set_property":
            metadata.setdefault("configuration", {})[op["key"]] = op["value"]
        else:
            metadata["description"] = op["text"]
        tables.write_commit(path, version, [_commit_info("SET TBLPROPERTIES", last_ict), {"metaData": metadata}])
    # optimize, vacuum, checkpoint, cleanup, merge, overwrite_day: not written by hand (the histories
    # of these shapes do not draw them)


def _identity_raised(snap: deltalog.Snapshot, top: int) -> dict:
    metadata = json.loads(json.dumps(snap.metadata))
    schema = snap.schema
    for f in schema["fields"]:
        if f["name"] == "seq":
            f["metadata"]["delta.identity.highWaterMark"] = top
    metadata["schemaString"] = json.dumps(schema)
    return {"metaData": metadata}


def _logical_rows(data: pa.Table, snap: deltalog.Snapshot, add: dict) -> list[dict]:
    """A file's rows under the table's logical names, the partition value from the log."""
    out = [dict() for _ in range(data.num_rows)]
    pv = add.get("partitionValues") or {}
    for f in _fields(snap):
        phys = _physical(f)
        if phys in data.column_names:
            values = data.column(phys).to_pylist()
        elif phys in pv:
            values = [dt.date.fromisoformat(pv[phys]) if f["name"] == "day" else pv[phys]] * data.num_rows
        else:
            values = [None] * data.num_rows
        for r, v in zip(out, values):
            r[f["name"]] = v
    return out


def _mark(top: int) -> dict:
    return {"domainMetadata": {"domain": "delta.rowTracking",
                               "configuration": json.dumps({"rowIdHighWaterMark": top}), "removed": False}}


def _partition_values(snap: deltalog.Snapshot, shape: Shape, rows: list[dict]) -> dict:
    if not shape.partitioned:
        return {}
    days = {r["day"] for r in rows}
    assert len(days) == 1
    return {snap.physical_name("day"): next(iter(days)).isoformat()}


RAW_OPS = {"append", "delete", "update", "add_column", "set_property", "description"}

"""Table shapes, made with the Python `deltalake` package (and, for the writer features it cannot
write, one commit written by hand from PROTOCOL.md, as tests/row_tracking does), and the two readers:
the Python package's SQL reader and DuckDB's Delta extension (delta-kernel-rs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import os
import time
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from deltalog import latest_version, snapshot

FIRST_DAY = dt.date(2026, 3, 1)
LAST_DAY = dt.date(2026, 5, 31)
DAYS = (LAST_DAY - FIRST_DAY).days + 1

ROW_ID = "_row-id-col-sim-7f1c2a90"
COMMIT_VERSION = "_row-commit-version-col-sim-c4d2e8b1"
# An in-commit timestamp far ahead of the machine's clock, as Databricks' writers may leave one.
UPGRADED_AT = 1_893_456_000_000


@dataclasses.dataclass(frozen=True)
class Shape:
    partitioned: bool = False
    amount: str = "double"  # or "decimal"
    cdf: bool = False
    mapping: str | None = None  # "name" | "id"
    deletion_vectors: bool = False  # the feature on (deltalake itself writes no vector)
    checkpoint_interval: int | None = None
    row_tracking: bool = False  # with in-commit timestamps and domainMetadata: written by hand
    identity: bool = False  # a `seq` column GENERATED ALWAYS AS IDENTITY: written by hand

    @property
    def name(self) -> str:
        parts = ["part" if self.partitioned else "flat", self.amount]
        if self.cdf:
            parts.append("cdf")
        if self.mapping:
            parts.append(f"cm-{self.mapping}")
        if self.deletion_vectors:
            parts.append("dv")
        if self.checkpoint_interval:
            parts.append(f"ckpt{self.checkpoint_interval}")
        if self.row_tracking:
            parts.append("rowtracking-ict")
        if self.identity:
            parts.append("identity-always")
        return "+".join(parts)

    @property
    def raw_writers(self) -> bool:
        """Whether other writers must commit by hand: the Python package refuses the table."""
        return self.row_tracking or self.identity

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


BASE_COLUMNS = ["order_id", "day", "amount", "country"]


def base_columns(shape: Shape) -> list[str]:
    return BASE_COLUMNS + (["seq"] if shape.identity else [])


def arrow_type(column: str, shape: Shape) -> pa.DataType:
    return {
        "order_id": pa.int64(),
        "day": pa.date32(),
        "amount": pa.decimal128(10, 2) if shape.amount == "decimal" else pa.float64(),
        "country": pa.string(),
        "seq": pa.int64(),
    }.get(column, pa.string())


def arrow_schema(shape: Shape, extra: list[str]) -> pa.Schema:
    return pa.schema([(c, arrow_type(c, shape)) for c in base_columns(shape) + extra])


def amount_value(cents: int, shape: Shape):
    if shape.amount == "decimal":
        return decimal.Decimal(cents).scaleb(-2)
    return cents / 100.0


def to_arrow(rows: list[dict], shape: Shape, extra: list[str]) -> pa.Table:
    schema = arrow_schema(shape, extra)
    return pa.table({c: [r.get(c) for r in rows] for c in schema.names}, schema=schema)


def create(path: str, shape: Shape, commits: list[list[dict]]) -> None:
    """The table at `path` with the rows of each commit, appended one commit each."""
    config: dict[str, str] = {}
    if shape.cdf:
        config["delta.enableChangeDataFeed"] = "true"
    if shape.mapping:
        config["delta.columnMapping.mode"] = shape.mapping
    if shape.deletion_vectors:
        config["delta.enableDeletionVectors"] = "true"
    if shape.checkpoint_interval:
        config["delta.checkpointInterval"] = str(shape.checkpoint_interval)
    DeltaTable.create(
        path,
        arrow_schema(shape, []),
        partition_by=["day"] if shape.partitioned else None,
        configuration=config or None,
    )
    for rows in commits:
        write_deltalake(path, to_arrow(rows, shape, []), mode="append")
    if shape.identity:
        enable_identity(path, max((r["seq"] for c in commits for r in c), default=0))
    if shape.row_tracking:
        enable_row_tracking(path)


def write_commit(path: str, version: int, actions: list[dict]) -> None:
    """A commit written by hand; `x`: never over one another writer made."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as log:
        log.write("\n".join(json.dumps(a) for a in actions) + "\n")


def writer_features(protocol: dict, more: set[str]) -> dict:
    """The protocol at writer version 7 naming what its legacy writer version implied, and `more`."""
    writer = protocol.get("minWriterVersion", 2)
    features = set(protocol.get("writerFeatures") or []) | {"appendOnly", "invariants"} | more
    if writer < 7:
        if writer >= 3:
            features.add("checkConstraints")
        if writer >= 4:
            features |= {"changeDataFeed", "generatedColumns"}
        if writer >= 5:
            features.add("columnMapping")
    out = {"minReaderVersion": protocol.get("minReaderVersion", 1), "minWriterVersion": 7,
           "writerFeatures": sorted(features)}
    if out["minReaderVersion"] >= 3:
        out["readerFeatures"] = protocol.get("readerFeatures") or []
    return out


def identity_mark(snap) -> int | None:
    for f in snap.schema.get("fields", []):
        if f["name"] == "seq":
            return (f.get("metadata") or {}).get("delta.identity.highWaterMark")
    return None


def enable_identity(path: str, mark: int) -> int:
    """`seq` made an identity column GENERATED ALWAYS (start 1, step 1, the mark at the largest value),
    in one commit written by hand as tests/identity.rs writes it."""
    snap = snapshot(path)
    version = snap.version + 1
    metadata = json.loads(json.dumps(snap.metadata))
    schema = snap.schema
    for f in schema["fields"]:
        if f["name"] == "seq":
            f.setdefault("metadata", {}).update({"delta.identity.start": 1, "delta.identity.step": 1,
                                                 "delta.identity.highWaterMark": mark,
                                                 "delta.identity.allowExplicitInsert": False})
    metadata["schemaString"] = json.dumps(schema)
    write_commit(path, version, [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "ALTER TABLE",
                        "operationParameters": {}, "engineInfo": "bf simulation (by hand)"}},
        {"protocol": writer_features(snap.protocol, {"identityColumns"})},
        {"metaData": metadata},
    ])
    return version


def enable_row_tracking(path: str) -> int:
    """The commit that turns row tracking on, as tests/row_tracking/mod.rs writes it: writer version 7
    with rowTracking, domainMetadata and inCommitTimestamp (columnMapping kept), the materialized
    columns named, every live file added again with its baseRowId, and the high-water mark."""
    snap = snapshot(path)
    version = snap.version + 1
    metadata = json.loads(json.dumps(snap.metadata))
    conf = metadata.setdefault("configuration", {})
    conf.update(
        {
            "delta.enableRowTracking": "true",
            "delta.rowTracking.materializedRowIdColumnName": ROW_ID,
            "delta.rowTracking.materializedRowCommitVersionColumnName": COMMIT_VERSION,
            "delta.enableInCommitTimestamps": "true",
            "delta.inCommitTimestampEnablementVersion": str(version),
            "delta.inCommitTimestampEnablementTimestamp": str(UPGRADED_AT),
        }
    )
    new_protocol = writer_features(snap.protocol, {"inCommitTimestamp", "domainMetadata", "rowTracking"})
    now = int(time.time() * 1000)
    actions: list[dict] = [
        {"commitInfo": {"timestamp": now, "inCommitTimestamp": UPGRADED_AT, "operation": "SET TBLPROPERTIES",
                        "operationParameters": {}, "engineInfo": "bf simulation (by hand)"}},
        {"protocol": new_protocol},
        {"metaData": metadata},
    ]
    next_id = 0
    for add_path, add in sorted(snap.files.items()):
        add = dict(add)
        records = json.loads(add["stats"])["numRecords"]
        add["baseRowId"] = next_id
        add["defaultRowCommitVersion"] = version
        add["dataChange"] = False
        next_id += records
        actions.append({"add": add})
    actions.append({"domainMetadata": {"domain": "delta.rowTracking",
                                       "configuration": json.dumps({"rowIdHighWaterMark": next_id - 1}),
                                       "removed": False}})
    write_commit(path, version, actions)
    return version


def version(path: str) -> int:
    return latest_version(path)


def _normalise(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value.quantize(decimal.Decimal("0.01")))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def normalise_row(row: dict, columns: list[str]) -> tuple:
    return tuple(_normalise(row.get(c)) for c in columns)


def read_rows(path: str, at: int | None = None) -> list[dict]:
    """The rows, read by the Python package's SQL reader (its pyarrow reader reads a column-mapped
    table as NULLs and refuses deletion vectors: docs/RELIABILITY.md)."""
    table = DeltaTable(path, version=at) if at is not None else DeltaTable(path)
    batches = QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.table(batches.read_all()).to_pylist()


class Duck:
    """The second reader: DuckDB's Delta extension loaded from the wheel's file, nothing fetched at
    run time (as tests/common/duckdb.rs does)."""

    def __init__(self):
        import duckdb
        import duckdb_extension_delta

        self.db = duckdb.connect(
            config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
        )
        ext = os.path.join(
            os.path.dirname(duckdb_extension_delta.__file__),
            "extensions",
            "v" + duckdb.__version__,
            "delta.duckdb_extension",
        )
        self.db.execute("LOAD '" + ext.replace("'", "''") + "'")
        self.db.execute("SET enable_external_file_cache = false")

    def rows(self, path: str) -> list[dict]:
        con = self.db.cursor()
        try:
            con.execute("SET enable_progress_bar = false")
            cur = con.execute("SELECT * FROM delta_scan('" + path.replace("'", "''") + "')")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]
        finally:
            con.close()

"""The Delta log read raw, without bf's code nor the deltalake package's: commits, the live files of a
version (replayed from the last checkpoint before it), the days a file may hold, row ids.

Everything the simulation judges bf by is read here or from the rows (tables.py), never from bf's
own ledger code.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import urllib.parse

import pyarrow.parquet as pq


def commit_path(table: str, version: int) -> str:
    return os.path.join(table, "_delta_log", f"{version:020d}.json")


def versions(table: str) -> list[int]:
    """The versions whose JSON commit is still in the log, oldest first."""
    found = []
    for path in glob.glob(os.path.join(table, "_delta_log", "*.json")):
        name = os.path.basename(path)[:-5]
        if name.isdigit():
            found.append(int(name))
    return sorted(found)


def latest_version(table: str) -> int:
    vs = versions(table)
    checkpoints = checkpoint_versions(table)
    return max(vs + checkpoints) if (vs or checkpoints) else -1


def checkpoint_versions(table: str) -> list[int]:
    found = set()
    for path in glob.glob(os.path.join(table, "_delta_log", "*.checkpoint*.parquet")):
        head = os.path.basename(path).split(".")[0]
        if head.isdigit():
            found.add(int(head))
    return sorted(found)


def read_commit(table: str, version: int) -> list[dict] | None:
    try:
        with open(commit_path(table, version)) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return None


def commit_info(actions: list[dict]) -> dict:
    for a in actions:
        if "commitInfo" in a:
            return a["commitInfo"]
    return {}


def _checkpoint_actions(table: str, version: int) -> list[dict]:
    actions: list[dict] = []
    for path in sorted(glob.glob(os.path.join(table, "_delta_log", f"{version:020d}.checkpoint*.parquet"))):
        data = pq.read_table(path).to_pylist()
        for row in data:
            for kind in ("add", "remove", "metaData", "protocol", "domainMetadata", "txn"):
                value = row.get(kind)
                if value is not None:
                    actions.append({kind: value})
    return actions


def _normalise_add(add: dict) -> dict:
    add = dict(add)
    pv = add.get("partitionValues")
    if isinstance(pv, list):  # a checkpoint's map comes back as a list of pairs
        add["partitionValues"] = {k: v for k, v in pv}
    return add


def _normalise_metadata(metadata: dict) -> dict:
    metadata = dict(metadata)
    for key in ("configuration",):
        if isinstance(metadata.get(key), list):
            metadata[key] = {k: v for k, v in metadata[key]}
    fmt = metadata.get("format")
    if isinstance(fmt, dict) and isinstance(fmt.get("options"), list):
        metadata["format"] = {**fmt, "options": {k: v for k, v in fmt["options"]}}
    return metadata


class Snapshot:
    """A version's live files, metadata, protocol and domains, replayed raw."""

    def __init__(self, version: int):
        self.version = version
        self.files: dict[str, dict] = {}
        self.metadata: dict = {}
        self.protocol: dict = {}
        self.domains: dict[str, dict] = {}
        self.adds_seen: dict[str, dict] = {}  # every add of a path, last one wins (for removes)

    def apply(self, actions: list[dict]) -> None:
        for a in actions:
            if "add" in a:
                add = _normalise_add(a["add"])
                self.files[add["path"]] = add
                self.adds_seen[add["path"]] = add
            elif "remove" in a:
                self.files.pop(a["remove"]["path"], None)
            elif "metaData" in a:
                self.metadata = _normalise_metadata(a["metaData"])
            elif "protocol" in a:
                self.protocol = a["protocol"]
            elif "domainMetadata" in a:
                d = a["domainMetadata"]
                if d.get("removed"):
                    self.domains.pop(d["domain"], None)
                else:
                    self.domains[d["domain"]] = d

    @property
    def configuration(self) -> dict:
        conf = self.metadata.get("configuration") or {}
        if isinstance(conf, list):
            conf = {k: v for k, v in conf}
        return conf

    @property
    def schema(self) -> dict:
        return json.loads(self.metadata.get("schemaString") or '{"fields": []}')

    def physical_name(self, column: str) -> str:
        for f in self.schema.get("fields", []):
            if f["name"] == column:
                return (f.get("metadata") or {}).get("delta.columnMapping.physicalName", column)
        return column


def snapshot(table: str, version: int | None = None) -> Snapshot | None:
    """The table at `version` (the latest with None), or None when the log can no longer say."""
    if version is None:
        version = latest_version(table)
    present = set(versions(table))
    start = -1
    cps = [c for c in checkpoint_versions(table) if c <= version]
    snap = Snapshot(version)
    if cps:
        start = cps[-1]
        snap.apply(_checkpoint_actions(table, start))
    for v in range(start + 1, version + 1):
        if v not in present:
            return None
        snap.apply(read_commit(table, v) or [])
    return snap


def _parse_day(value) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def file_days(add: dict, day_physical: str) -> tuple[dt.date, dt.date] | None:
    """The days a file may hold, as its partition value or statistics say; None: any day."""
    pv = add.get("partitionValues") or {}
    if day_physical in pv:
        d = _parse_day(pv[day_physical])
        return (d, d) if d else None
    stats = add.get("stats")
    if isinstance(stats, str) and stats:
        try:
            s = json.loads(stats)
        except ValueError:
            return None
        lo = _parse_day((s.get("minValues") or {}).get(day_physical))
        hi = _parse_day((s.get("maxValues") or {}).get(day_physical))
        if lo and hi:
            return (lo, hi)
    return None


def overlaps(days: tuple[dt.date, dt.date] | None, first: dt.date, last: dt.date) -> bool:
    if days is None:
        return True
    return not (days[1] < first or days[0] > last)


def file_exists(table: str, path: str) -> bool:
    return os.path.exists(os.path.join(table, urllib.parse.unquote(path)))


def row_tracking_ids(table: str, snap: Snapshot, key: str = "order_id") -> dict:
    """Each live row's (stable row id, row commit version) by key, as PROTOCOL.md defines them: the
    materialized column's value where the file holds one, else baseRowId + position and
    defaultRowCommitVersion. Deletion vectors are not expected on these tables."""
    conf = snap.configuration
    rid_col = conf.get("delta.rowTracking.materializedRowIdColumnName")
    rcv_col = conf.get("delta.rowTracking.materializedRowCommitVersionColumnName")
    key_phys = snap.physical_name(key)
    found: dict = {}
    duplicates = []
    for path, add in snap.files.items():
        data = pq.read_table(os.path.join(table, urllib.parse.unquote(path)))
        names = data.column_names
        n = data.num_rows
        keys = data.column(key_phys).to_pylist() if key_phys in names else [None] * n
        rid = data.column(rid_col).to_pylist() if rid_col in names else [None] * n
        rcv = data.column(rcv_col).to_pylist() if rcv_col in names else [None] * n
        for i in range(n):
            base = add.get("baseRowId")
            r = rid[i] if rid[i] is not None else (None if base is None else base + i)
            v = rcv[i] if rcv[i] is not None else add.get("defaultRowCommitVersion")
            if keys[i] in found:
                duplicates.append(keys[i])
            found[keys[i]] = (r, v)
    return found

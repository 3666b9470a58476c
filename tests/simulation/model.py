"""The model: what every row of the table should be, who wrote it last (bf's slice of which backfill,
a rollback, or another writer) at which version, and what bf's reviewed plans allowed it to change.
Also the journal of every commit, which the invariants judge bf's decisions by.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools

_entry_ids = itertools.count()


class Violation(AssertionError):
    """An invariant broken: a lost or changed row, a false statement, a panic."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"[{kind}] {detail}")
        self.kind = kind
        self.detail = detail


@dataclasses.dataclass(eq=False)
class Entry:
    """A row as one commit left it (`row` None: deleted there)."""

    row: dict | None
    writer: str  # "init" | "other" | "bf:<backfill id>" | "rollback:<backfill id>" | "restore"
    version: int
    step: int
    # Row tracking: the stable row id this row was seen with (None until seen).
    rid: int | None = None
    uid: int = dataclasses.field(default_factory=lambda: next(_entry_ids))

    def describe(self) -> str:
        what = "deleted" if self.row is None else "written"
        return f"{what} by {self.writer} at version {self.version} (step {self.step})"


@dataclasses.dataclass
class Commit:
    """One commit of the journal: who made it and what it did."""

    version: int
    who: str  # "other" | "bf"
    kind: str  # the writer's operation, or bf's: slice, comment, restore, rollback-slice, rollback-comment
    step: int
    data_change: bool = False
    metadata: bool = False
    maintenance: bool = False
    days: frozenset = frozenset()
    plan_id: str | None = None
    backfill_id: str | None = None
    rollback_of: str | None = None


class Model:
    def __init__(self):
        self.entries: dict[int, Entry] = {}
        self.extra: list[str] = []  # columns other writers added, in order
        self.snapshots: dict[int, tuple[dict[int, Entry], list[str]]] = {}
        self.journal: list[Commit] = []
        self.absorbed = -1

    # --- rows ---------------------------------------------------------------------------------
    def rows(self) -> dict[int, dict]:
        return {k: e.row for k, e in self.entries.items() if e.row is not None}

    def rows_on(self, first: dt.date, last: dt.date) -> dict[int, dict]:
        return {k: r for k, r in self.rows().items() if first <= r["day"] <= last}

    def set(self, key: int, row: dict | None, writer: str, version: int, step: int,
            keep_rid: bool = False) -> None:
        old = self.entries.get(key)
        if row is not None:
            row = {**{c: None for c in self.extra}, **row}
        entry = Entry(row, writer, version, step)
        if keep_rid and old is not None:
            entry.rid = old.rid
        self.entries[key] = entry

    def snap(self, version: int) -> None:
        self.snapshots[version] = (dict(self.entries), list(self.extra))
        self.absorbed = max(self.absorbed, version)

    def at(self, version: int) -> tuple[dict[int, Entry], list[str]] | None:
        """The model at `version`: the snapshot taken at it, or at the last version before it."""
        best = None
        for v in self.snapshots:
            if v <= version and (best is None or v > best):
                best = v
        return None if best is None else self.snapshots[best]

    def add_column(self, name: str) -> None:
        if name not in self.extra:
            self.extra.append(name)
            for e in self.entries.values():
                if e.row is not None and name not in e.row:
                    e.row[name] = None

    def columns(self) -> list[str]:
        return ["order_id", "day", "amount", "country", *self.extra]

    # --- journal ------------------------------------------------------------------------------
    def since(self, version: int, until: int | None = None) -> list[Commit]:
        return [c for c in self.journal if c.version > version and (until is None or c.version < until)]

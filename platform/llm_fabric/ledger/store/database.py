"""The ledger store: every request record ingested once, in one DuckDB file, with its daily rollups.

Where it lives: `store:` in ledger.yaml (relative to the site repo), else `<site repo>.ledger.duckdb`
beside the repo (never inside it: the store is data, not configuration, and grows every day).

Invariants:
- Idempotent. A record is added only if its natural key (llm_fabric.ledger.store.records: the request id
  on the record's day, else the whole content and its occurrence number among the identical
  records of its file) is not in the store yet, nor earlier in the same ingest (the first one, by
  file order and line, is kept). Ingesting a file twice, or files that overlap with the same
  multiplicity, changes nothing the second time; two identical id-less lines in one file are two
  requests. What was merged is counted per file, day and reason in `merges`, for the reports.
- Atomic. An ingest is one DuckDB transaction: records, rollups and the `ingests` log row are
  committed together or not at all. A killed ingest leaves the store as it was (DuckDB discards an
  uncommitted transaction when it next opens the file).
- Bad records are counted and listed (file, line, why), never stored and never silently dropped:
  the ingest adds the good ones and says how many bad ones it left, or with `strict` adds nothing.
- Append-only. An ingest adds records and never changes or removes a stored one (what it takes out
  again in its own transaction are its own bad and repeated records). So the rollups
  (llm_fabric.ledger.store.rollups), sums over records, are kept by adding the new records' sums to the
  days and months that received a record, in the same transaction; other days are not touched.
- One writer at a time (DuckDB's file lock); a second process waits up to `wait_s`, then gets an error.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb

from llm_fabric.documents import load_model
from llm_fabric.errors import ConfigError, Problem, UsageError
from llm_fabric.ledger.store import rollups
from llm_fabric.ledger.store.records import RecordFormat
from llm_fabric.ledger.store.sources import TYPED, SourceFile, normalised_select, open_source, quote, record_files
from llm_fabric.request_record import CONTENT_KEY
from llm_fabric.site.loader import LEDGER_FILE
from llm_fabric.site.models import DEFAULT_MAX_BAD_PCT, LedgerConfig

SCHEMA_VERSION = "2"  # 2: records.occurrence and the merges table (id-less records, issue 31)
STORE_SUFFIX = ".ledger.duckdb"
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name VARCHAR NOT NULL, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    day DATE, ts TIMESTAMP, model VARCHAR, tenant VARCHAR, site VARCHAR,
    prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT, ttft_us BIGINT,
    status VARCHAR, ok BOOLEAN, request_id VARCHAR, ingest INTEGER NOT NULL, file INTEGER NOT NULL,
    line BIGINT NOT NULL, problem VARCHAR, occurrence INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rejects (ingest INTEGER NOT NULL, file INTEGER NOT NULL, line BIGINT NOT NULL,
    problem VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS ingests (
    ingest INTEGER NOT NULL, ingested_at TIMESTAMP NOT NULL, files VARCHAR[] NOT NULL, records BIGINT NOT NULL,
    bad BIGINT NOT NULL, duplicates BIGINT NOT NULL, added BIGINT NOT NULL, days BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS merges (ingest INTEGER NOT NULL, file VARCHAR NOT NULL, day DATE NOT NULL,
    reason VARCHAR NOT NULL, records BIGINT NOT NULL);
"""
# why a record was merged into another (not added): the four ways a natural key can repeat
SAME_ID_INGEST = "same request id on its day as an earlier record of this ingest"
SAME_ID_STORED = "same request id on its day as a stored record"
SAME_CONTENT_INGEST = "no request id; same content and occurrence in its file as an earlier record of this ingest"
SAME_CONTENT_STORED = "no request id; same content and occurrence in its file as a stored record"
STORED = ("day", *TYPED)
# the stored form of records.CONTENT_KEY: TTFT as the whole microseconds it is stored in
_CONTENT = tuple("ttft_us" if c == "ttft_ms" else c for c in CONTENT_KEY)
BAD_LISTED = 50  # bad records listed by file and line; all of them are counted


class _ReadAgain(Exception):
    """The fast JSON reader could not take file `index`, or found a bad record in it."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


@dataclass(frozen=True)
class BadRecord:
    file: Path
    line: int
    problem: str

    def as_problem(self) -> Problem:
        return Problem(self.problem, file=self.file, line=self.line)


@dataclass(frozen=True)
class Merged:
    """`records` records of `file` not added: their natural key repeats, for `reason`."""

    file: str
    reason: str
    records: int

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "reason": self.reason, "records": self.records}


@dataclass
class IngestResult:
    files: list[Path]
    records: int = 0  # records read, bad ones included
    bad: int = 0
    duplicates: int = 0  # good records already in the store, or repeated within this ingest
    added: int = 0
    days: list[str] = field(default_factory=list)  # days that received a record (YYYY-MM-DD)
    bad_listed: list[BadRecord] = field(default_factory=list)  # the first BAD_LISTED, by file and line
    merged: list[Merged] = field(default_factory=list)  # the duplicates by file and reason

    def as_dict(self) -> dict[str, object]:
        return {
            "files": [str(f) for f in self.files],
            "records": self.records,
            "bad": self.bad,
            "duplicates": self.duplicates,
            "added": self.added,
            "days": self.days,
            "bad_records": [p.as_problem().as_dict() for p in self.bad_listed],
            "merged_duplicates": [m.as_dict() for m in self.merged],
        }


def merged_in_month(con: duckdb.DuckDBPyConnection, first_day: date, next_first_day: date) -> list[Merged]:
    """The duplicates every ingest merged on the month's days, per file and reason (for the reports)."""
    rows = con.execute(
        "SELECT file, reason, CAST(sum(records) AS BIGINT) FROM merges WHERE day >= ? AND day < ? "
        "GROUP BY ALL ORDER BY file, reason",
        [first_day, next_first_day],
    ).fetchall()
    return [Merged(str(f), str(r), int(n)) for f, r, n in rows]


def default_store_path(site_root: Path) -> Path:
    resolved = site_root.resolve()
    return resolved.parent / f"{resolved.name}{STORE_SUFFIX}"


def store_path(site_root: Path, configured: str | None) -> Path:
    """The store a site repo's ledger.yaml names (relative to the repo), else the default beside the repo."""
    root = site_root.resolve()
    if configured is None:
        return default_store_path(root)
    path = Path(configured).expanduser()
    path = path if path.is_absolute() else (root / path).resolve()
    if path.is_relative_to(root):
        raise ConfigError(
            [
                Problem(
                    f"the ledger store {path} is inside the site repo",
                    file=root / "ledger.yaml",
                    field="store",
                    hint=f"put it beside the repo, e.g. store: ../{root.name}{STORE_SUFFIX} (it is data, not config)",
                )
            ]
        )
    return path


def site_store(site_root: Path, store: Path | None) -> Path:
    """`store` when given, else the store the site repo's ledger.yaml names, else the default beside the repo."""
    if store is not None:
        return store
    ledger_yaml = site_root / LEDGER_FILE
    if not ledger_yaml.is_file():
        raise UsageError(
            f"{ledger_yaml} not found: no ledger store configured",
            hint="pass --store FILE, or -C DIR for a site repo with a ledger.yaml",
        )
    return store_path(site_root, load_model(ledger_yaml, LedgerConfig).store)


def site_max_bad_pct(site_root: Path) -> Decimal:
    """ledger.yaml's max_bad_pct, else the default (also with --store and no site repo)."""
    ledger_yaml = site_root / LEDGER_FILE
    if not ledger_yaml.is_file():
        return DEFAULT_MAX_BAD_PCT
    return load_model(ledger_yaml, LedgerConfig).max_bad_pct


def configure(con: duckdb.DuckDBPyConnection, memory_limit: str, temp_dir: Path | None = None) -> None:
    """UTC session time (naive record times are UTC) and a memory cap, spilling to `temp_dir` past it."""
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = {quote(memory_limit)}")
    if temp_dir is not None:
        con.execute(f"SET temp_directory = {quote(str(temp_dir))}")


def _connect(path: Path | None, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    if path is None:
        return duckdb.connect(":memory:")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() >= deadline:
                raise UsageError(
                    f"cannot open the ledger store {path}: {exc}",
                    hint="another `fabric ledger ingest` may be writing it; retry when it is done",
                ) from exc
            time.sleep(0.2)


class LedgerStore:
    """An open store: `path` None is a store in memory (`fabric report --requests`)."""

    def __init__(
        self,
        path: Path | None,
        *,
        read_only: bool = False,
        memory_limit: str = "4GB",
        wait_s: float = 30.0,
        temp_dir: Path | None = None,
    ) -> None:
        if read_only and path is not None and not path.is_file():
            raise UsageError(
                f"no ledger store at {path}",
                hint="ingest records first: `fabric ledger ingest -C DIR FILE` (with the same --store, if given)",
            )
        if path is not None and not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # an in-memory store spills to a folder of its own (DuckDB's default would be ./.tmp)
        self._spill = tempfile.TemporaryDirectory(prefix="fabric-ledger-") if path is None and not temp_dir else None
        self.con = _connect(path, read_only, wait_s)
        configure(self.con, memory_limit, Path(self._spill.name) if self._spill else temp_dir)
        if read_only:
            self._check_version()
        else:
            self.con.execute(SCHEMA + rollups.SCHEMA)
            if not self.con.execute("SELECT count(*) FROM meta").fetchall()[0][0]:
                self.con.execute("INSERT INTO meta VALUES ('schema', ?)", [SCHEMA_VERSION])
            self._check_version()

    def _check_version(self) -> None:
        try:
            rows = self.con.execute("SELECT value FROM meta WHERE name = 'schema'").fetchall()
        except duckdb.CatalogException as exc:
            raise UsageError(f"{self.path} is not a ledger store (no `meta` table)") from exc
        if rows != [(SCHEMA_VERSION,)]:
            raise UsageError(
                f"{self.path} is a ledger store of schema {rows[0][0] if rows else 'unknown'}, "
                f"this fabric reads schema {SCHEMA_VERSION}",
                hint="use the fabric release that wrote it, or re-ingest the records into a new store",
            )

    def close(self) -> None:
        self.con.close()
        if self._spill is not None:
            self._spill.cleanup()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def ingest(
        self,
        paths: Sequence[Path],
        fmt: RecordFormat = "auto",
        *,
        strict: bool = False,
        max_bad_pct: Decimal | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> IngestResult:
        """Add the files' (and folders' record files') good records not yet in the store, and their sums to the
        rollups of their days.

        Each file is read once, straight into `records` (tagged with this ingest, its file and line);
        what must not stay is then taken out again in the same transaction: bad records (moved to
        `rejects`), repeats within the ingest, records already stored. Those checks read the new rows
        (stored records only on days that had some); the removals cost only when there is something to
        remove. The rollups are then computed from the remaining new rows alone
        (llm_fabric.ledger.store.rollups.add), never from the records stored before.

        Nothing is stored (UsageError) when a file holds records but no good one (the wrong file), or
        when more than `max_bad_pct` percent of the records read are bad (None: no limit).
        """
        note = progress or (lambda _msg: None)
        sources = [open_source(self.con, p, fmt) for p in record_files(paths)]
        line_by_line: set[int] = set()
        while True:
            try:
                return self._ingest(sources, strict, max_bad_pct, note, line_by_line)
            except _ReadAgain as again:  # rolled back: redo it, reading that file line by line
                line_by_line.add(again.index)

    def _ingest(
        self,
        sources: list[SourceFile],
        strict: bool,
        max_bad_pct: Decimal | None,
        note: Callable[[str], None],
        line_by_line: set[int],
    ) -> IngestResult:
        result = IngestResult([s.path for s in sources])
        if not sources:
            return result
        con = self.con
        paths = result.files
        with self._transaction():
            ingest_id = int(con.execute("SELECT coalesce(max(ingest), 0) + 1 FROM ingests").fetchall()[0][0])
            for i, source in enumerate(sources):
                note(f"reading {source.path} ({i + 1} of {len(sources)})")
                # JSON Lines and CSV are numbered by row_number() OVER (), which counts in file order only
                # while DuckDB keeps the insertion order; Parquet brings its own row numbers
                con.execute(f"SET preserve_insertion_order = {str(source.kind != 'parquet').lower()}")
                self._insert(ingest_id, i, source, i in line_by_line)
            new = f"records WHERE ingest = {ingest_id}"
            note("checking natural keys")
            result.records, result.bad, ids, anonymous = con.execute(
                "SELECT count(*), count(problem), count(request_id) FILTER (WHERE problem IS NULL), "
                f"count(*) FILTER (WHERE problem IS NULL AND request_id IS NULL) FROM {new}"
            ).fetchall()[0]
            if result.bad:
                self._reject(ingest_id, sources, result, strict, max_bad_pct)
            # a hash seen once is a key seen once; a repeated hash may be a collision, checked exactly below.
            # One count(DISTINCT) per statement, each only when there is something to count: two in one
            # statement cost 2.5x as much CPU (DuckDB 2.0.0, 10 M records), even with the second one empty
            good, content = f"{new} AND problem IS NULL", ", ".join(_CONTENT)
            anonymous_rows = f"{good} AND request_id IS NULL"
            anonymous_repeat = False
            if anonymous and anonymous != self._distinct(content, anonymous_rows):
                # identical id-less records: each is numbered among its file's identical ones (all start at 1)
                self._number_occurrences(ingest_id)
                anonymous_repeat = anonymous != self._distinct(f"{content}, occurrence", anonymous_rows)
            if (ids and ids != self._distinct("day, request_id", f"{good} AND request_id IS NOT NULL")) or (
                anonymous_repeat
            ):
                self._drop_repeats(ingest_id)
            self._drop_stored(ingest_id)
            result.merged = self._merge(ingest_id, sources)
            result.added = int(con.execute(f"SELECT count(*) FROM {new}").fetchall()[0][0])
            result.duplicates = result.records - result.bad - result.added
            result.days = [str(d) for (d,) in con.execute(f"SELECT DISTINCT day FROM {new} ORDER BY day").fetchall()]
            note(f"updating the rollups of {len(result.days)} day(s)")
            rollups.add(con, f"(SELECT * FROM {new})")
            con.execute(
                "INSERT INTO ingests VALUES (?, now()::TIMESTAMP, ?, ?, ?, ?, ?, ?)",
                [
                    ingest_id,
                    [str(p) for p in paths],
                    result.records,
                    result.bad,
                    result.duplicates,
                    result.added,
                    len(result.days),
                ],
            )
            note("committing")
        return result

    def _insert(self, ingest_id: int, index: int, source: SourceFile, line_by_line: bool) -> None:
        """Insert one file's records, good and bad. JSON Lines go through DuckDB's JSON reader first; a file
        it cannot take (a malformed line fails the statement, and with it the transaction) raises
        `_ReadAgain`, and so does one holding a bad record: the ingest is then redone reading that file
        line by line, so that every bad record has its exact line."""
        columns = (
            f"CAST(ts AS DATE) AS day, {', '.join(STORED[1:])}, {ingest_id} AS ingest, {index} AS file, line, problem, "
            "1 AS occurrence"
        )
        fast = source.kind == "jsonl" and not line_by_line
        try:
            self.con.execute(
                f"INSERT INTO records SELECT {columns} FROM ({normalised_select(self.con, source, fast=fast)})"
            )
        except duckdb.Error as exc:
            if fast:
                raise _ReadAgain(index) from exc
            raise UsageError(f"{source.path}: cannot read request records: {exc}") from exc
        if fast:
            this_file = f"ingest = {ingest_id} AND file = {index}"
            if self.con.execute(f"SELECT count(problem) FROM records WHERE {this_file}").fetchall()[0][0]:
                raise _ReadAgain(index)

    def _distinct(self, columns: str, rows: str) -> int:
        """How many distinct hashes of `columns` the `rows` (FROM ...) hold."""
        return int(self.con.execute(f"SELECT count(DISTINCT hash({columns})) FROM {rows}").fetchall()[0][0])

    def _reject(
        self,
        ingest_id: int,
        sources: Sequence[SourceFile],
        result: IngestResult,
        strict: bool,
        max_bad_pct: Decimal | None,
    ) -> None:
        """Move this ingest's bad records to `rejects` (file, line, why), listing the first ones; refuse the
        ingest when a file holds no good record or the bad share is above `max_bad_pct`."""
        con = self.con
        listed = con.execute(
            f"SELECT file, line, problem FROM records WHERE ingest = {ingest_id} AND problem IS NOT NULL "
            f"ORDER BY file, line LIMIT {BAD_LISTED}"
        ).fetchall()
        result.bad_listed = [BadRecord(sources[f].path, int(line), str(p)) for f, line, p in listed]
        if strict:
            raise UsageError(
                f"{result.bad} bad request record(s); nothing was ingested (--strict)",
                hint="; ".join(str(b.as_problem()) for b in result.bad_listed[:5]),
            )
        all_bad = con.execute(
            f"SELECT file, count(*) FROM records WHERE ingest = {ingest_id} GROUP BY file "
            "HAVING count(problem) = count(*) ORDER BY file"
        ).fetchall()
        for index, count in all_bad:
            first = next((b for b in result.bad_listed if b.file == sources[index].path), None)
            raise UsageError(
                f"{sources[index].path}: none of its {count:,} record(s) is a valid request record; "
                "nothing was ingested",
                hint=(f"first: {first.as_problem()}; " if first else "")
                + "is it the right file? Request records are the gateway meter's (docs/ledger.md) or a "
                "LiteLLM spend-log export (--format litellm)",
            )
        share = Decimal(100 * result.bad) / Decimal(result.records)
        if max_bad_pct is not None and share > max_bad_pct:
            raise UsageError(
                f"{result.bad:,} of {result.records:,} request records ({share:.2f} %) are bad, more than "
                f"max_bad_pct = {max_bad_pct} %; nothing was ingested",
                hint="; ".join(str(b.as_problem()) for b in result.bad_listed[:3])
                + "; fix the export, or raise max_bad_pct in ledger.yaml (or pass --max-bad-pct)",
            )
        con.execute(
            "INSERT INTO rejects SELECT ingest, file, line, problem FROM records "
            f"WHERE ingest = {ingest_id} AND problem IS NOT NULL"
        )
        con.execute(f"DELETE FROM records WHERE ingest = {ingest_id} AND problem IS NOT NULL")

    def _number_occurrences(self, ingest_id: int) -> None:
        """Number each id-less record among the identical ones of its file (1, 2, ... by line)."""
        content = ", ".join(_CONTENT)
        self.con.execute(
            "UPDATE records SET occurrence = o.nth FROM ("
            f"SELECT rowid AS id, row_number() OVER (PARTITION BY file, {content} ORDER BY line) AS nth "
            f"FROM records WHERE ingest = {ingest_id} AND request_id IS NULL AND problem IS NULL QUALIFY nth > 1) o "
            "WHERE records.rowid = o.id"
        )

    def _drop_repeats(self, ingest_id: int) -> None:
        """Keep the first record (by file and line) of each natural key this ingest holds more than once."""
        content = ", ".join(_CONTENT)
        self._mark(
            f"SELECT rowid, file, day, {quote(SAME_ID_INGEST)} FROM records WHERE ingest = {ingest_id} "
            "AND request_id IS NOT NULL "
            "QUALIFY row_number() OVER (PARTITION BY day, request_id ORDER BY file, line) > 1 "
            f"UNION ALL SELECT rowid, file, day, {quote(SAME_CONTENT_INGEST)} FROM records "
            f"WHERE ingest = {ingest_id} AND request_id IS NULL "
            f"QUALIFY row_number() OVER (PARTITION BY {content}, occurrence ORDER BY file, line) > 1"
        )

    def _mark(self, select: str) -> None:
        """Delete the records (rowid, file, day, reason) `select` gives, keeping their count per file, day and
        reason in the temporary `merged` table for _merge."""
        self.con.execute("CREATE TEMP TABLE IF NOT EXISTS merged (id BIGINT, file INTEGER, day DATE, reason VARCHAR)")
        self.con.execute(f"INSERT INTO merged {select}")
        self.con.execute("DELETE FROM records WHERE rowid IN (SELECT id FROM merged)")

    def _merge(self, ingest_id: int, sources: Sequence[SourceFile]) -> list[Merged]:
        """Log what this ingest merged (`merges`: per file, day and reason) and return it per file and reason."""
        con = self.con
        if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'merged' AND temporary").fetchall()[
            0
        ][0]:
            return []
        counts = con.execute(
            "SELECT file, day, reason, count(*) FROM merged GROUP BY ALL ORDER BY file, day, reason"
        ).fetchall()
        con.execute("DROP TABLE merged")
        if not counts:
            return []
        con.executemany(
            "INSERT INTO merges VALUES (?, ?, ?, ?, ?)",
            [[ingest_id, str(sources[f].path), day, reason, n] for f, day, reason, n in counts],
        )
        totals: dict[tuple[str, str], int] = {}
        for f, _day, reason, n in counts:
            key = (str(sources[f].path), str(reason))
            totals[key] = totals.get(key, 0) + int(n)
        return [Merged(file, reason, n) for (file, reason), n in totals.items()]

    def _drop_stored(self, ingest_id: int) -> None:
        """Remove this ingest's records whose natural key an earlier ingest stored (only on days both hold)."""
        con = self.con
        days = f"(SELECT DISTINCT day FROM records WHERE ingest = {ingest_id})"
        # a day holds stored records iff it has daily_usage rows (this ingest's are not there yet): the small
        # table answers for the large one
        held = con.execute(f"SELECT count(*) FROM (SELECT 1 FROM daily_usage WHERE day IN {days} LIMIT 1)")
        if not held.fetchall()[0][0]:
            return  # new days only: nothing stored to collide with
        earlier = f"records WHERE ingest < {ingest_id} AND day IN {days}"
        same_content = " AND ".join(f"o.{c} IS NOT DISTINCT FROM n.{c}" for c in (*_CONTENT, "occurrence"))
        self._mark(
            f"SELECT n.rowid, n.file, n.day, {quote(SAME_ID_STORED)} FROM records n WHERE n.ingest = {ingest_id} "
            "AND n.request_id IS NOT NULL "
            f"AND EXISTS (SELECT 1 FROM (SELECT day, request_id FROM {earlier}) o "
            "WHERE o.day = n.day AND o.request_id = n.request_id) "
            f"UNION ALL SELECT n.rowid, n.file, n.day, {quote(SAME_CONTENT_STORED)} FROM records n "
            f"WHERE n.ingest = {ingest_id} AND n.request_id IS NULL "
            f"AND EXISTS (SELECT 1 FROM (SELECT * FROM {earlier} AND request_id IS NULL) o WHERE {same_content})"
        )

    def status(self) -> dict[str, object]:
        """What the store holds: records, days, months, ingests (the last one's counts)."""
        (records, first, last), *_ = self.con.execute("SELECT count(*), min(day), max(day) FROM records").fetchall()
        months = self.con.execute(
            "SELECT strftime(month, '%Y-%m'), CAST(sum(requests) AS BIGINT) FROM ("
            "SELECT date_trunc('month', day) AS month, requests FROM daily_usage) GROUP BY ALL ORDER BY 1"
        ).fetchall()
        last_ingest = self.con.execute(
            "SELECT ingest, strftime(ingested_at, '%Y-%m-%dT%H:%M:%SZ'), files, records, bad, duplicates, added, days "
            "FROM ingests ORDER BY ingest DESC LIMIT 1"
        ).fetchall()
        keys = ("ingest", "ingested_at", "files", "records", "bad", "duplicates", "added", "days")
        return {
            "store": str(self.path) if self.path else None,
            "records": records,
            "first_day": str(first) if first else None,
            "last_day": str(last) if last else None,
            "months": {m: n for m, n in months},
            "last_ingest": dict(zip(keys, last_ingest[0], strict=True)) if last_ingest else None,
        }

"""Request records as Arrow batches, normalised for the tally (llm_fabric.ledger.tally).

Two ways in:
- Parquet files in the fabric's schema with typed columns (timestamp, integers, strings) and no
  `request_id`: pyarrow reads them directly, one task per row group, the strings as dictionaries,
  so the tally counts by dictionary code and never hashes a string per record.
- anything else (JSON Lines, CSV, LiteLLM exports, text timestamps, `request_id` deduplication):
  the DuckDB view `records` (llm_fabric.ledger.records), streamed as Arrow batches by one task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from llm_fabric.errors import UsageError
from llm_fabric.ledger.records import RecordSource
from llm_fabric.ledger.tally import MISSING, Coded, Columns

STRINGS = ("model", "tenant", "status")
COLUMNS = ("ts", "model", "tenant", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "ttft_ms", "status")
_SUCCESS = {"ok", "success", "succeeded"}
# Records per Arrow batch (at most tally.MAX_BATCH). A quarter million keeps a batch's decoded columns
# (13 MB) in the L3 cache while the tally reads them; against 1 M it took 240 MB off the peak RSS at
# 10 M records and 220 MB at 50 M, at the same speed (docs/benchmarks.md).
BATCH = 1 << 18


@dataclass(frozen=True)
class Task:
    """A share of the records one thread reads: `where` names it in errors and progress.

    `batches(spare_cpus)`: with CPUs to spare (fewer tasks than threads), a task may decode with them.
    """

    where: str
    batches: Callable[[bool], Iterator[pa.RecordBatch]]


def _is_string(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _direct(schema: pa.Schema) -> bool:
    """Whether pyarrow can read this Parquet schema as it is (else DuckDB converts it)."""
    names = set(schema.names)
    if "request_id" in names or not {"ts", "model", "tenant", "prompt_tokens", "completion_tokens", "status"} <= names:
        return False
    kinds = {name: schema.field(name).type for name in names & set(COLUMNS)}
    return (
        pa.types.is_timestamp(kinds["ts"])
        and all(_is_string(kinds[c]) for c in STRINGS)
        and all(
            pa.types.is_integer(kinds[c])
            for c in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")
            if c in kinds
        )
        and ("ttft_ms" not in kinds or pa.types.is_integer(kinds["ttft_ms"]) or pa.types.is_floating(kinds["ttft_ms"]))
    )


def _row_group_reader(path: Path, index: int, columns: list[str]) -> Callable[[bool], Iterator[pa.RecordBatch]]:
    def read(spare_cpus: bool) -> Iterator[pa.RecordBatch]:
        try:
            # mapped, not read: column chunks are views of the page cache rather than fresh buffers,
            # and fresh memory is what a report process pays most for (docs/benchmarks.md)
            file = pq.ParquetFile(path, read_dictionary=list(STRINGS), memory_map=True)
            yield from file.iter_batches(batch_size=BATCH, row_groups=[index], columns=columns, use_threads=spare_cpus)
        except (pa.ArrowException, OSError) as exc:
            raise UsageError(f"{path}: cannot read row group {index} of the request records: {exc}") from exc

    return read


def parquet_tasks(source: RecordSource) -> list[Task] | None:
    """One task per row group when every file can be read directly; None when one cannot."""
    if source.deduplicated or any(f != "fabric" for f in source.formats):
        return None
    tasks: list[Task] = []
    for path in source.files:
        if not path.name.lower().endswith(".parquet"):
            return None
        try:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except (pa.ArrowException, OSError) as exc:
            raise UsageError(f"{path}: cannot read the Parquet footer: {exc}") from exc
        if not _direct(schema):
            return None
        columns = [c for c in COLUMNS if c in schema.names]
        tasks += [
            Task(f"{path} (row group {i + 1} of {meta.num_row_groups})", _row_group_reader(path, i, columns))
            for i in range(meta.num_row_groups)
        ]
    return tasks


def duckdb_task(con: duckdb.DuckDBPyConnection, source: RecordSource) -> Task:
    """The view `records` (register_records) as one stream of batches."""
    where = "request records (" + ", ".join(str(p) for p in source.files) + ")"

    def read(_spare_cpus: bool) -> Iterator[pa.RecordBatch]:  # DuckDB uses every CPU anyway
        try:
            yield from con.sql(f"SELECT {', '.join(COLUMNS)} FROM records").to_arrow_reader(BATCH)
        except duckdb.Error as exc:
            raise UsageError(f"{where} could not be read: {exc}", hint="see docs/ledger.md") from exc

    return Task(where, read)


def _frozen(array: pa.Array, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A null-free primitive Arrow array's values as a read-only numpy array, without a copy.

    Not Array.to_numpy: its first call imports pandas, 0.3-0.5 s of every report.
    """
    kind = np.dtype(dtype)
    if array.null_count or kind.itemsize * 8 != array.type.bit_width:
        raise ValueError(f"{array.type} with {array.null_count} nulls is not {kind}")
    return np.frombuffer(array.buffers()[1], dtype=kind, count=len(array), offset=array.offset * kind.itemsize)


def _coded(array: pa.Array, column: str, where: str, nulls_allowed: bool = False) -> Coded:
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    names = array.dictionary.to_pylist()
    if None in names or len(set(names)) != len(names):  # a dictionary Parquet did not unify
        array = pc.dictionary_encode(array.dictionary_decode())
        names = array.dictionary.to_pylist()
    indices = array.indices
    if indices.null_count:
        if not nulls_allowed:
            raise UsageError(
                f"{where}: {indices.null_count} request record(s) have no {column}",
                hint=f"every record names its {column} (docs/ledger.md)",
            )
        indices = indices.fill_null(len(names))
    return Coded(_frozen(indices.cast(pa.int32()), np.int32), names)


def _success(status: str | None) -> bool:
    """SUCCESS_SQL (records.py) for one status value: ok/success/succeeded or a 2xx code."""
    return status is not None and (status.lower() in _SUCCESS or (len(status) == 3 and status[0] == "2"))


def _ints(array: pa.Array | None, size: int, missing: int = 0) -> npt.NDArray[np.int64]:
    """int64 values, a missing one as `missing`."""
    if array is None:
        array = pa.nulls(size, pa.int64())
    array = array.cast(pa.int64())
    return _frozen(array.fill_null(missing) if array.null_count else array, np.int64)


def _timestamps(array: pa.Array) -> npt.NDArray[np.int64]:
    kind = array.type
    if kind.unit != "us":
        array = array.cast(pa.timestamp("us", tz=kind.tz), safe=False)
    return _ints(array.cast(pa.int64()), len(array), MISSING)


def _floats(array: pa.Array | None) -> npt.NDArray[np.float64]:
    """float64 values, a missing one as NaN; empty without the column."""
    if array is None:
        return np.zeros(0)
    array = array.cast(pa.float64())
    return _frozen(array.fill_null(float("nan")) if array.null_count else array, np.float64)


def normalise(batch: pa.RecordBatch, where: str) -> Columns:
    """A batch with the COLUMNS (cached_prompt_tokens and ttft_ms optional) as tally Columns."""
    names = batch.schema.names

    def column(name: str) -> pa.Array | None:
        return batch.column(name) if name in names else None

    size = batch.num_rows
    status = _coded(batch.column("status"), "status", where, nulls_allowed=True)
    return Columns(
        ts_us=_timestamps(batch.column("ts")),
        model=_coded(batch.column("model"), "model", where),
        tenant=_coded(batch.column("tenant"), "tenant", where),
        status=status.codes,
        ok_lut=np.array([_success(s) for s in status.names] + [False], dtype=np.int64),
        prompt=_ints(column("prompt_tokens"), size, MISSING),
        output=_ints(column("completion_tokens"), size),
        cached=_ints(column("cached_prompt_tokens"), size),
        ttft_ms=_floats(column("ttft_ms")),
    )

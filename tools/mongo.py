r"""The MongoDB stand-in: a mongodump folder loaded into mongomock and queried read-only.

No MongoDB server can run here (Debian has no package for it), so MongoDB is **not** what
answers a DAB agent's Mongo queries. What stands in for it is **mongomock** (PyPI `mongomock`,
a pure-Python, in-memory implementation of the pymongo API), filled from the dump's `.bson`
files (or `.bson.gz`), decoded with pymongo's `bson` module. Results can differ from a real
server wherever mongomock does (its documented gaps).

mongomock runs in Python and C inside whatever process holds it, with no timeout or memory bound
of its own (a catastrophic regex such as `^(\w+\s?)*$` holds the GIL until it ends; fifteen
`$concat` doubling stages took 1.1 GB). So agents reach it through `MongoWorker`: the database is
loaded and queried in a worker process under a memory rlimit (tools/worker_process.py), which
is killed when a query outlives the SQL timeout (`sql_timeout_s`) and started again for the next
one. A query's text is capped at QUERY_MAX_CHARS and its nesting at MAX_DEPTH before it is used.

A query is one JSON object (MongoDB Extended JSON, so `{"$date": "2020-01-01T00:00:00Z"}` and
`{"$oid": "..."}` work), either a find or an aggregation:

    {"collection": "books", "filter": {...}, "projection": {...}, "sort": {"year": -1}, "skip": 0, "limit": 10}
    {"collection": "books", "pipeline": [{"$match": {...}}, {"$group": {...}}]}

Supported, as mongomock 4.3 implements them:
- filter: $eq $ne $gt $gte $lt $lte $in $nin $exists $type $regex (with $options) $all $size
  $elemMatch $not $and $or $nor $expr; dotted paths into sub-documents and arrays;
- projection (inclusion or exclusion), sort (an object or [[field, 1 | -1], ...]), skip, limit;
- aggregation stages: $match $project $addFields $set $group $sort $limit $skip $unwind $count
  $lookup $graphLookup $facet $bucket $replaceRoot $sample, with mongomock's expression and
  accumulator operators ($sum $avg $min $max $push $addToSet $first $last, arithmetic, string,
  date, array, set and conditional operators).

mongomock has no indexes: every query scans its collection in Python. That is quick for
thousands of documents and takes seconds for a hundred thousand (measured: a $group over
100k documents in ~3 s); a $lookup scans the foreign collection once per document.

Read-only: only find and aggregate exist here; any other field in the query object is
refused, and so are the writing stages $out and $merge and the server-side JavaScript
operators $where, $function and $accumulator, wherever they appear (also inside $facet or
$lookup sub-pipelines). Not supported: views, $text search, geospatial queries, and the
stages mongomock lacks ($sortByCount $unset $replaceWith $bucketAuto ...: an error says so).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bson
import mongomock
from bson import json_util
from bson.codec_options import CodecOptions, DatetimeConversion
from mongomock.aggregate import process_pipeline
from mongomock.collection import Collection, Cursor

from ..core.safe_load import MAX_DEPTH, DocumentTooComplex, check_depth, load_json
from ..core.tool import ToolError
from .worker_process import WorkerDied, WorkerProcess, WorkerTimedOut

ENGINE = f"mongomock {mongomock.__version__}"  # named in list_db output, so traces say what answered
FIND_FIELDS = {"filter", "projection", "sort", "skip", "limit"}
REFUSED_OPERATORS = {
    "$out": "it writes a collection",
    "$merge": "it writes a collection",
    "$where": "it runs server-side JavaScript",
    "$function": "it runs server-side JavaScript",
    "$accumulator": "it runs server-side JavaScript",
}
# Dates outside Python's range decode as bson.DatetimeMS instead of failing the whole load.
DUMP_CODEC: CodecOptions = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO)
QUERY_FORMS = (
    'a query is {"collection": C, "filter"?: {...}, "projection"?: {...}, "sort"?: {...}, "skip"?: n, "limit"?: n} '
    'or {"collection": C, "pipeline": [stages]}'
)


QUERY_MAX_CHARS = 100_000  # a query's JSON text
RESULT_MAX_BYTES = 32 << 20  # a result's documents as BSON, checked in the worker before it sends them


class MongoQueryError(ValueError):
    """A query that is malformed, refused (it would write) or failed in the engine."""


@dataclass
class MongoResult:
    documents: list[dict[str, Any]]
    more: bool  # documents beyond the cap exist


class MongoDatabase:
    """One logical MongoDB database from a mongodump folder: only find and aggregate are exposed."""

    def __init__(self, name: str, dump_folder: Path, db_name: str | None = None) -> None:
        self.name = name
        self._client: mongomock.MongoClient = mongomock.MongoClient()
        self._db = self._client[db_name or name]
        for collection, documents in read_dump(Path(dump_folder), db_name):
            if documents:
                self._db[collection].insert_many(documents)
            else:
                self._db.create_collection(collection)

    def collections(self) -> list[str]:
        return sorted(self._db.list_collection_names())

    def count(self, collection: str) -> int:
        return self._db[collection].count_documents({})

    def fields(self, collection: str, sample: int = 100) -> dict[str, list[str]]:
        """Top-level field -> BSON-ish type names seen in the first `sample` documents."""
        seen: dict[str, set[str]] = {}
        for document in all_documents(self._db[collection].find().limit(sample)):
            for key, value in document.items():
                seen.setdefault(key, set()).add(type_name(value))
        return {key: sorted(types) for key, types in seen.items()}

    def query(self, text: str, max_rows: int) -> MongoResult:
        """Run one find/aggregate query given as JSON text; at most max_rows documents."""
        spec = parse_query(text)
        collection = spec.pop("collection")
        if collection not in self._db.list_collection_names():
            raise MongoQueryError(f"no collection {collection!r}; collections: {', '.join(self.collections())}")
        try:
            documents = self._run(self._db[collection], spec, max_rows + 1)
        except (mongomock.OperationFailure, NotImplementedError, TypeError, ValueError) as error:
            raise MongoQueryError(f"query failed in {ENGINE}: {type(error).__name__}: {error}") from error
        check_result_size(documents[:max_rows])
        return MongoResult(documents[:max_rows], len(documents) > max_rows)

    @staticmethod
    def _run(collection: Collection, spec: dict[str, Any], fetch: int) -> list[dict[str, Any]]:
        if "pipeline" in spec:
            documents = all_documents(collection.find())
            return list(process_pipeline(documents, collection.database, spec["pipeline"], None))[:fetch]
        cursor = collection.find(spec.get("filter", {}), spec.get("projection"))
        if "sort" in spec:
            cursor = cursor.sort(spec["sort"])
        cursor = cursor.skip(spec.get("skip", 0))
        limit = spec.get("limit") or fetch  # Mongo's limit 0 means no limit
        return all_documents(cursor.limit(min(limit, fetch)))

    def close(self) -> None:
        self._client.close()


class MongoWorker:
    """A `MongoDatabase` loaded and queried in a worker process, ended at each query's deadline."""

    def __init__(self, name: str, dump_folder: Path, db_name: str | None, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._worker = WorkerProcess(f"database {name!r}", MongoDatabase, (name, dump_folder, db_name), timeout_s)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return self._worker.call(method, *args)
        except ToolError as error:  # the worker's own refusal (MemoryError in it)
            raise MongoQueryError(str(error)) from None
        except WorkerTimedOut as timed_out:
            limit = "the task's wall-time limit" if timed_out.wall_time else f"the {self.timeout_s:g}s timeout"
            raise MongoQueryError(
                f"query stopped at {limit} (its process was ended and the database reloaded); $match early, "
                "avoid backtracking regexes, or add a $limit"
            ) from None
        except WorkerDied:
            raise MongoQueryError(
                "the query needed more memory than a query may use (its process ended and the database was "
                "reloaded); $match early, $project fewer fields or add a $limit"
            ) from None

    def collections(self) -> list[str]:
        names: list[str] = self._call("collections")
        return names

    def count(self, collection: str) -> int:
        number: int = self._call("count", collection)
        return number

    def fields(self, collection: str, sample: int = 100) -> dict[str, list[str]]:
        found: dict[str, list[str]] = self._call("fields", collection, sample)
        return found

    def query(self, text: str, max_rows: int) -> MongoResult:
        check_query_size(text)
        result: MongoResult = self._call("query", text, max_rows)
        return result

    def close(self) -> None:
        self._worker.stop()


def check_result_size(documents: list[dict[str, Any]]) -> None:
    """Refuse a result larger than RESULT_MAX_BYTES (as BSON), counted document by document."""
    size = 0
    for document in documents:
        size += len(bson.encode(document, check_keys=False, codec_options=DUMP_CODEC))
        if size > RESULT_MAX_BYTES:
            raise MongoQueryError(
                f"refused: the result is larger than {RESULT_MAX_BYTES >> 20} MB; $project fewer fields, "
                "$group, or add a $limit"
            )


def check_query_size(text: str) -> None:
    if len(text) > QUERY_MAX_CHARS:
        raise MongoQueryError(f"refused: the query is {len(text):,} characters, more than {QUERY_MAX_CHARS:,}")


def all_documents(cursor: Cursor) -> list[dict[str, Any]]:
    """The cursor's documents (after skip and limit) in one list.

    mongomock's own iteration copies the rest of the result for every document it yields
    (quadratic: 35 s instead of 3 s for a $group over 100k documents), so this takes the list
    from its private `_compute_results` (present throughout mongomock 4.x).
    """
    return cursor._compute_results(with_limit_and_skip=True)


# ---------------------------------------------------------------- the dump


def read_dump(folder: Path, db_name: str | None = None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(collection, documents) of each `.bson` / `.bson.gz` file of a mongodump folder.

    mongodump writes `<out>/<db>/<collection>.bson`: the files are read from `folder/db_name`
    when it exists, else from `folder` itself, else from its only subfolder holding any.
    """
    directory = dump_directory(folder, db_name)
    for path in sorted(directory.iterdir()):
        collection = collection_name(path)
        if collection is not None and not collection.startswith("system."):
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rb") as handle:
                yield collection, list(bson.decode_file_iter(handle, DUMP_CODEC))


def dump_directory(folder: Path, db_name: str | None) -> Path:
    if not folder.is_dir():
        raise FileNotFoundError(f"mongodump folder not found: {folder}")
    if db_name and (folder / db_name).is_dir():
        return folder / db_name
    if any(collection_name(p) for p in folder.iterdir()):
        return folder
    holders = [p for p in folder.iterdir() if p.is_dir() and any(collection_name(f) for f in p.iterdir())]
    if len(holders) != 1:
        found = ", ".join(p.name for p in holders) or "none"
        raise FileNotFoundError(f"{folder}: expected one database folder of .bson files, found: {found}")
    return holders[0]


def collection_name(path: Path) -> str | None:
    """The collection a dump file holds: its metadata's collectionName, else the file name."""
    for suffix in (".bson", ".bson.gz"):
        if path.name.endswith(suffix) and path.is_file():
            stem = path.name.removesuffix(suffix)
            metadata = path.with_name(f"{stem}.metadata.json")
            if metadata.is_file():
                return load_json(metadata.read_text(encoding="utf-8")).get("collectionName", stem)
            return stem
    return None


# ---------------------------------------------------------------- queries


def parse_query(text: str) -> dict[str, Any]:
    """The query object, checked: a known form, nothing that writes or runs JavaScript."""
    check_query_size(text)
    try:
        spec = json_util.loads(text)
        check_depth(spec)
    except RecursionError:
        raise MongoQueryError(f"refused: the query is nested deeper than {MAX_DEPTH} levels") from None
    except DocumentTooComplex as error:
        raise MongoQueryError(f"refused: the query is {error}") from None
    except (ValueError, TypeError) as error:  # json.JSONDecodeError is a ValueError
        raise MongoQueryError(f"the query is not valid (Extended) JSON: {error}; {QUERY_FORMS}") from error
    if not isinstance(spec, dict) or not isinstance(spec.get("collection"), str):
        raise MongoQueryError(f"missing collection name; {QUERY_FORMS}")
    allowed = {"collection", "pipeline"} if "pipeline" in spec else {"collection", *FIND_FIELDS}
    if set(spec) - allowed:
        unknown = ", ".join(sorted(set(spec) - allowed))
        raise MongoQueryError(f"refused field(s) {unknown}: the database is read-only and {QUERY_FORMS}")
    refuse_operators(spec)
    check_shapes(spec)
    if "sort" in spec:
        spec["sort"] = sort_keys(spec["sort"])
    return spec


def check_shapes(spec: dict[str, Any]) -> None:
    pipeline = spec.get("pipeline", [])
    if not isinstance(pipeline, list) or not all(isinstance(stage, dict) for stage in pipeline):
        raise MongoQueryError("pipeline must be a list of stage objects")
    for field in ("filter", "projection"):
        if not isinstance(spec.get(field, {}), dict):
            raise MongoQueryError(f"{field} must be an object")
    for field in ("skip", "limit"):
        value = spec.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MongoQueryError(f"{field} must be a non-negative integer")


def refuse_operators(value: Any) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in REFUSED_OPERATORS:
                raise MongoQueryError(f"refused {key}: {REFUSED_OPERATORS[key]}; the database is read-only")
            refuse_operators(inner)
    elif isinstance(value, list):
        for inner in value:
            refuse_operators(inner)


def sort_keys(sort: Any) -> list[tuple[str, int]]:
    """A sort given as {"field": 1 | -1, ...} or [["field", 1 | -1], ...]."""
    pairs = list(sort.items()) if isinstance(sort, dict) else sort
    if not isinstance(pairs, list) or not all(
        isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str) and p[1] in (1, -1) for p in pairs
    ):
        raise MongoQueryError('sort must be {"field": 1 or -1, ...} or [["field", 1 or -1], ...]')
    return [(field, direction) for field, direction in pairs]


def type_name(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "double", str: "string", dict: "object", list: "array"}
    return names.get(type(value), "null" if value is None else type(value).__name__)

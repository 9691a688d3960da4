"""The tasks' pg_dump data sources restored once per run, and the tasks rewritten to query them."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ...core.task import DataSource, DataSourceKind, Task
from .cluster import BACKEND_MEMORY_MB, PostgresCluster
from .errors import PostgresError, PostgresUnavailable
from .restore import Target, restore_dump
from .roles import READER_CONNECTION_LIMIT
from .server import PostgresServer

log = logging.getLogger(__name__)


def prepare_postgres(
    tasks: list[Task],
    *,
    url: str | None = None,
    cluster: PostgresCluster | None = None,
    reader_url: str | None = None,
    connection_limit: int = READER_CONNECTION_LIMIT,
    backend_memory_mb: int = BACKEND_MEMORY_MB,
) -> tuple[list[Task], PostgresCluster | PostgresServer | None]:
    """Restore every pg_dump the tasks' postgres data sources name, once per (dump, database
    name), and return copies of the tasks whose locations are `postgresql://` URLs of a reader.

    Restores go to the server `url` (as a `PostgresServer`, with `reader_url` if given), else
    into `cluster`, else into a cluster started here; what was started is returned (the caller
    stops it: that also drops the run's reader role); None otherwise, also when no task needs
    one. Tasks already unavailable are left alone; a dump that fails to restore makes its tasks
    unavailable with the reason. The reader is checked in every restored database afterwards
    (`reader_problems`). `connection_limit`: the reader's sessions at once; `backend_memory_mb`:
    each server process's address space, in a cluster started here. Raises PostgresUnavailable
    when there is nowhere to restore, PostgresError when the reader role cannot be made safe."""
    wanted = [(task, source) for task in tasks if not task.unavailable for source in task.data if _is_dump(source)]
    if not wanted:
        return list(tasks), None
    started: PostgresCluster | PostgresServer | None = None
    if url is not None:
        started = PostgresServer(url, reader_url, connection_limit=connection_limit).start()
    elif cluster is None:
        started = PostgresCluster(connection_limit=connection_limit, backend_memory_mb=backend_memory_mb).start()
    target = cluster if started is None else started
    assert target is not None
    try:
        restored = _restore_all(target, [_key(task, source) for task, source in wanted])
        target.check_reader(_restored_databases(restored))
    except BaseException:
        if started:
            started.stop()
        raise
    return [_rewrite(task, restored) for task in tasks], started


def _restored_databases(restored: dict[_Key, str | PostgresError]) -> list[str]:
    urls = [url for url in restored.values() if isinstance(url, str)]
    return sorted({unquote(urlsplit(url).path.lstrip("/")) for url in urls})


def _is_dump(source: DataSource) -> bool:
    return source.kind == DataSourceKind.POSTGRES and (source.location or "").endswith(".sql")


def _database_name(task: Task, source: DataSource) -> str:
    """db_config's db_name of the source (DAB), else the dump file's name."""
    clients = task.metadata.get("db_config", {}).get("db_clients", {})
    client = clients.get(source.name) if isinstance(clients, dict) else None
    name = client.get("db_name") if isinstance(client, dict) else None
    return str(name) if name else Path(source.location or "").stem


_Key = tuple[str, Path]  # (database name, dump file)


def _key(task: Task, source: DataSource) -> _Key:
    return _database_name(task, source), Path(source.location or "")


def _restore_all(target: Target, wanted: list[_Key]) -> dict[_Key, str | PostgresError]:
    """Each distinct (name, dump) restored once: its URL, or the error. Two different dumps
    asking for one database name get distinct names."""
    results: dict[_Key, str | PostgresError] = {}
    dumps_by_name: dict[str, Path] = {}
    for name, dump in wanted:
        if (name, dump) in results:
            continue
        server_name, number = name, 1
        while dumps_by_name.get(server_name, dump) != dump:
            number += 1
            server_name = f"{name}_{number}"
        dumps_by_name[server_name] = dump
        try:
            results[name, dump] = restore_dump(target, server_name, dump)
        except PostgresUnavailable:
            raise  # nothing else can be restored either
        except PostgresError as error:
            log.warning("%s", error)
            results[name, dump] = error
    return results


def _rewrite(task: Task, restored: dict[_Key, str | PostgresError]) -> Task:
    if task.unavailable:
        return task
    data, problems = [], []
    for source in task.data:
        result = restored.get(_key(task, source)) if _is_dump(source) else None
        if isinstance(result, str):
            source = source.model_copy(update={"location": result})
        elif result is not None:
            problems.append(f"{source.name}: {result}")
        data.append(source)
    return task.model_copy(update={"data": data, "unavailable": "; ".join(problems) or None})

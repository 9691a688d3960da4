"""Where the PostgreSQL server programs are installed (initdb, postgres, pg_dump)."""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import PostgresUnavailable

VERSION_DIRS = "/usr/lib/postgresql/*/bin"  # Debian/Ubuntu layout, one folder per major version
CLUSTER_PROGRAMS = ("initdb", "postgres")
INSTALL_HINT = (
    "install the PostgreSQL server binaries (Debian/Ubuntu: `apt-get install postgresql`) "
    "or pass --postgres-url postgresql://USER:PASSWORD@HOST:PORT/postgres naming a server to restore into"
)


def find_bin_dir(
    programs: Sequence[str] = CLUSTER_PROGRAMS, *, path: str | None = None, version_dirs: str | None = None
) -> Path:
    """The first folder holding all `programs`: where PATH's hits (`path`, default $PATH) really
    live, then the newest `version_dirs` folder (default VERSION_DIRS). Raises PostgresUnavailable
    with install instructions."""
    for folder in _candidate_dirs(programs[0], path, version_dirs or VERSION_DIRS):
        if all((folder / program).is_file() for program in programs):
            return folder
    raise PostgresUnavailable(f"PostgreSQL binaries not found ({', '.join(programs)}); {INSTALL_HINT}")


def _candidate_dirs(program: str, path: str | None, version_dirs: str) -> Iterator[Path]:
    hit = shutil.which(program, path=os.environ.get("PATH", "") if path is None else path)
    if hit:
        # /usr/local/bin/initdb may be a symlink into a folder that also has psql
        yield Path(hit).parent
        yield Path(hit).resolve().parent
    versioned = [Path(p) for p in glob.glob(version_dirs)]
    yield from sorted(versioned, key=lambda folder: _version_key(folder.parent.name), reverse=True)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)

"""Systems in environments of their own: a system declares its Python requirements (or a Node package list),
and the suite builds that environment once into a cache keyed by the requirements' hash, records the
resolved versions, and runs the system there.

    requirements = Requirements(python=("smolagents[mcp]==1.26.0",))
    built = ensure_environment(requirements)      # built once; later calls (any process) reuse it
    built.python, built.resolved, built.build_s   # its interpreter, {distribution: version}, seconds (None: reused)

A Python environment is a virtual environment made by `uv` (`uv venv` with this machine's Python 3.11, then
`uv pip install --compile-bytecode`), or by `venv` and pip when `installer="pip"` (pip reads this machine's pip
configuration: the local CPU torch wheel; pip compiles bytecode itself): an agent's sandbox shows it read-only,
so no unit could write the bytecode it would otherwise compile on every start. A Node environment is a folder
where `npm install` put the packages. A `build` command (an agent in Go, Rust, C, ...) runs once after them, in
the agent's own sandbox (systems/agent_sandbox.py: no network, its agent folder read-only, only `{build_dir}`
writable), keyed by the hash of the command and of the agent folder's files. Each is built in a temporary folder
beside its place and renamed into it when complete, under a file lock, so that parallel runs build it once and
a failed build leaves nothing half-made. Two versions of one framework are two requirement lists, hence two
environments, side by side in one run.

The cache is `$DAC_ENV_CACHE`, else `$XDG_CACHE_HOME/data-agent-compare/environments` (~/.cache/...).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CACHE_VARIABLE = "DAC_ENV_CACHE"
RESOLVED_FILE = "resolved.json"  # written last: its presence means the environment is complete
BUILD_TIMEOUT_S = 1800.0


class EnvironmentBuildError(RuntimeError):
    """An environment could not be built (the installer failed, or is missing); the message names why."""


@dataclass(frozen=True)
class Requirements:
    """What a system's own environment holds: pip requirement strings and/or npm package specs."""

    python: tuple[str, ...] = ()
    node: tuple[str, ...] = ()
    installer: Literal["uv", "pip"] = "uv"  # pip: this machine's pip configuration applies (local wheels)
    python_version: str = "3.11"
    build: str | None = None  # a shell command run once into {build_dir}, in the agent's sandbox
    sources: Path | None = None  # the agent's folder the build reads (its files are part of the key)

    def key(self) -> str:
        """The cache key: a hash of everything that decides what gets installed and built."""
        described: dict[str, object] = {
            "python": sorted(self.python),
            "node": sorted(self.node),
            "installer": self.installer if self.python else None,
            "python_version": self.python_version if self.python else None,
        }
        if self.python and self.installer == "uv":
            described["bytecode"] = True  # environments of earlier releases had none: built again
        if self.build is not None:
            described["build"] = self.build
            described["sources"] = files_hash(self.sources) if self.sources else None
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def files_hash(folder: Path) -> str:
    """A hash of the names and contents of the files under `folder` (caches and version control left out)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        parts = set(path.relative_to(folder).parts)
        if path.is_file() and not parts & {"__pycache__", ".git", "node_modules"}:
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class BuiltEnvironment:
    """A built environment: where it is, what it resolved to, and what building it took."""

    requirements: Requirements
    path: Path
    resolved: dict[str, dict[str, str]]  # {"python": {dist: version}, "node": {package: version}}
    build_s: float | None  # seconds this call spent building it; None when it was already there

    @property
    def python(self) -> Path | None:
        return self.path / "venv" / "bin" / "python" if self.requirements.python else None

    @property
    def node_modules(self) -> Path | None:
        return self.path / "node" / "node_modules" if self.requirements.node else None

    @property
    def build_dir(self) -> Path | None:
        return self.path / "build" if self.requirements.build is not None else None

    @property
    def bin_dirs(self) -> list[Path]:
        """Folders to put first on PATH: the venv's scripts, the Node packages' executables."""
        folders = []
        if self.python is not None:
            folders.append(self.python.parent)
        if self.node_modules is not None:
            folders.append(self.node_modules / ".bin")
        return folders

    def describe(self) -> dict[str, object]:
        """What the manifest records: the key and the resolved versions (not the build time, which differs)."""
        return {"key": self.requirements.key(), "path": str(self.path), "resolved": self.resolved}


def cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "data-agent-compare" / "environments"


def find_environment(requirements: Requirements, root: Path | None = None) -> BuiltEnvironment | None:
    """The environment of `requirements` if the cache holds it (complete), else None; builds nothing."""
    return _read_built(requirements, (root or cache_root()) / requirements.key())


def ensure_environment(requirements: Requirements, root: Path | None = None) -> BuiltEnvironment:
    """The environment of `requirements`, built now if the cache does not hold it yet."""
    root = root or cache_root()
    place = root / requirements.key()
    found = _read_built(requirements, place)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{requirements.key()}.lock"):
        found = _read_built(requirements, place)  # another process built it while this one waited
        if found is not None:
            return found
        start = time.perf_counter()
        building = Path(tempfile.mkdtemp(prefix=f".{requirements.key()}-", dir=root))
        building.chmod(0o755)  # mkdtemp's 0700 would hide it from every agent's uid (their sandboxes show it)
        try:
            resolved = _build(requirements, building, place)
            (building / RESOLVED_FILE).write_text(json.dumps(resolved, indent=1, sort_keys=True))
            shutil.rmtree(place, ignore_errors=True)
            building.rename(place)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        return BuiltEnvironment(requirements, place, resolved, time.perf_counter() - start)


def _read_built(requirements: Requirements, place: Path) -> BuiltEnvironment | None:
    try:
        resolved = json.loads((place / RESOLVED_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if place.stat().st_mode & 0o005 != 0o005:  # built by an earlier release with mkdtemp's 0700
        place.chmod(0o755)
    return BuiltEnvironment(requirements, place, resolved, None)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(requirements: Requirements, folder: Path, place: Path) -> dict[str, dict[str, str]]:
    resolved: dict[str, dict[str, str]] = {}
    if requirements.python:
        resolved["python"] = _build_python(requirements, folder / "venv")
    if requirements.node:
        resolved["node"] = _build_node(requirements.node, folder / "node")
    if requirements.build is not None:
        resolved["build"] = _run_build(requirements, folder, place)
    return resolved


def _run_build(requirements: Requirements, folder: Path, place: Path) -> dict[str, str]:
    """The build command in an agent's sandbox: the folder being built shown (writable) where it will be."""
    from ..tools.agent_sandbox import AgentSandboxError, run_build

    output = folder / "build"
    output.mkdir()
    fields = {
        "build_dir": str(place / "build"),
        "agent_dir": str(requirements.sources or place),
        "python": str(place / "venv" / "bin" / "python") if requirements.python else sys.executable,
        "node_modules": str(place / "node" / "node_modules") if requirements.node else "",
    }
    try:
        command = requirements.build.format_map(fields)  # type: ignore[union-attr]
        shown = [path for path in (requirements.sources,) if path is not None]
        outcome = run_build(command, requirements.sources or place, shown, {output: place / "build"}, BUILD_TIMEOUT_S)
    except (KeyError, IndexError, ValueError) as wrong:
        raise EnvironmentBuildError(f"the build command {requirements.build!r} cannot be filled in: {wrong}") from None
    except AgentSandboxError as refused:
        raise EnvironmentBuildError(f"the build's sandbox could not be made: {refused}") from None
    if outcome.failure or outcome.timed_out:
        why = outcome.failure or f"it did not end within {BUILD_TIMEOUT_S:g} s"
        raise EnvironmentBuildError(f"the build command {command!r} failed: {why}")
    _hand_back(output)
    return {"command": command, "sources": files_hash(requirements.sources) if requirements.sources else ""}


def _hand_back(folder: Path) -> None:
    """The build's output, owned by the suite's user again and readable by every agent's uid."""
    for path in [folder, *folder.rglob("*")]:
        if os.geteuid() == 0:
            os.lchown(path, 0, 0)
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o555 if path.is_dir() or os.access(path, os.X_OK) else 0o444))


def _build_python(requirements: Requirements, venv: Path) -> dict[str, str]:
    interpreter = find_python(requirements.python_version)
    python = venv / "bin" / "python"
    if requirements.installer == "uv":
        uv = find_uv()
        env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(venv)}
        _run([uv, "venv", "--quiet", "--python", interpreter, str(venv)], env)
        install = [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python)]
        _run([*install, *requirements.python], env)
        frozen = _run([uv, "pip", "freeze", "--python", str(python)], env)
    else:
        _run([interpreter, "-m", "venv", str(venv)], dict(os.environ))
        pip = [str(python), "-m", "pip", "--quiet", "--disable-pip-version-check"]
        _run([*pip, "install", *requirements.python], dict(os.environ))
        frozen = _run([str(python), "-m", "pip", "freeze", "--disable-pip-version-check"], dict(os.environ))
    return parse_freeze(frozen)


def _build_node(packages: tuple[str, ...], folder: Path) -> dict[str, str]:
    npm = shutil.which("npm")
    if npm is None:
        raise EnvironmentBuildError(
            "npm is not installed: a Node environment needs node and npm (apt-get install nodejs npm)"
        )
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": "dac-agent-env", "private": True, "type": "module"}))
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
    _run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder), *packages], env)
    listing = json.loads(_run([npm, "ls", "--json", "--depth=0", "--prefix", str(folder)], env) or "{}")
    return {name: str(info.get("version")) for name, info in (listing.get("dependencies") or {}).items()}


def parse_freeze(text: str) -> dict[str, str]:
    """`name==version` lines as a mapping (editable or URL lines keep their text as the version)."""
    resolved = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        if not sep:
            name, _, version = line.partition(" @ ")
        resolved[name.strip().lower()] = version.strip()
    return resolved


def find_python(version: str) -> str:
    """This machine's Python of that version (the base interpreter of the suite's own when it matches), never
    a download."""
    candidates = [Path(sys.base_prefix) / "bin" / f"python{version}", shutil.which(f"python{version}")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise EnvironmentBuildError(f"Python {version} is not installed here: an environment needs it (python{version})")


def find_uv() -> str:
    """uv beside this interpreter (the suite's venv installs it), else on PATH."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file():
        return str(beside)
    found = shutil.which("uv")
    if found is None:
        raise EnvironmentBuildError(
            "uv is not installed: `pip install uv` into the suite's environment (setup.sh does)"
        )
    return found


def _run(argv: list[str], env: dict[str, str]) -> str:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as failure:
        raise EnvironmentBuildError(f"building an environment failed: {' '.join(argv[:3])}: {failure}") from None
    if done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.splitlines() if "is ignored" not in line)[-1500:]
        raise EnvironmentBuildError(
            f"building an environment failed: {' '.join(argv[:4])} … (status {done.returncode}): {tail}"
        )
    return done.stdout

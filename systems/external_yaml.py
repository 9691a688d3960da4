"""External systems defined in a YAML file given to `--plugin` (docs/bring-your-own-agent.md):

    systems:
      my_agent:
        command: [node, "{agent_dir}/agent.js", "{question_file}"]
        env: {MY_SETTING: "1"}
        node: ["openai@6"]
        agent_dir: agents/          # relative to this file; default: this file's folder

Every entry is checked when the file is loaded: a wrong one is refused with one line naming the file, the system
and the field (ExternalSystemError), before any unit runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..core import SYSTEMS
from .external import ExternalSystemError, external_system

FIELDS = ("command", "env", "python", "node", "installer", "build", "agent_dir", "agent_files", "description")
SYSTEM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")  # no path separators, commas or spaces
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_ENV = ("DAC_", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "PATH", "HOME", "TMPDIR", "NODE_PATH")


def load_external_systems(path: Path) -> list[str]:
    """Register the systems the YAML file defines; returns their names. Paths in it are relative to the file."""
    path = path.resolve()
    systems = _systems_of(path)
    checked = [(name, _entry(path, name, entry)) for name, entry in systems.items()]
    for name, options in checked:
        external_system(name, source=str(path), **options)
    return [name for name, _ in checked]


def _systems_of(path: Path) -> dict[Any, Any]:
    import yaml

    from ..core.safe_load import DocumentTooComplex, load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as unreadable:
        raise ExternalSystemError(f"{path}: cannot be read: {unreadable.strerror}") from None
    except UnicodeDecodeError as undecodable:
        raise ExternalSystemError(f"{path}: not UTF-8 text (byte {undecodable.start})") from None
    try:
        data = load_yaml(text) or {}
    except (yaml.YAMLError, DocumentTooComplex) as wrong:
        raise ExternalSystemError(f"{path}: cannot be read as YAML: {str(wrong).splitlines()[0]}") from None
    systems = data.get("systems") if isinstance(data, dict) else None
    if not isinstance(systems, dict) or not systems:
        raise ExternalSystemError(f"{path}: field 'systems': expected a mapping of system names to definitions")
    return systems


def _entry(path: Path, name: Any, entry: Any) -> dict[str, Any]:
    """One system's definition checked field by field, as `external_system`'s keyword arguments."""
    where = f"{path}: system {name!r}"
    if not isinstance(name, str) or not SYSTEM_NAME.fullmatch(name):
        raise ExternalSystemError(
            f"{where}: a system name is a letter then letters, digits, '_', '.' or '-' (at most 64; no '/', ',' or "
            "spaces)"
        )
    taken = SYSTEMS.entries().get(name)
    if taken is not None and not taken.path.startswith(f"{path}:"):  # loaded again from this file: the same system
        raise ExternalSystemError(f"{where}: the name is taken by another system ({taken.origin}): rename it")
    if not isinstance(entry, dict):
        raise ExternalSystemError(f"{where}: expected a mapping ({', '.join(FIELDS)})")
    unknown = sorted(set(entry) - set(FIELDS), key=str)
    if unknown:
        raise ExternalSystemError(f"{where}: field {unknown[0]!r} is unknown ({', '.join(FIELDS)})")
    agent_dir = _agent_dir(where, path, entry.get("agent_dir")) if _needs_folder(entry) else None
    return {
        "command": _command(where, entry.get("command")),
        "env": _env(where, entry.get("env", {})),
        "python": _strings(where, "python", entry.get("python")),
        "node": _strings(where, "node", entry.get("node")),
        "installer": _text(where, "installer", entry.get("installer", "uv")),
        "build": _text(where, "build", entry.get("build")) if entry.get("build") is not None else None,
        "agent_dir": agent_dir,
        "agent_files": _agent_files(where, agent_dir, entry.get("agent_files")) if agent_dir else (),
        "description": _text(where, "description", entry.get("description", "")),
    }


def _command(where: str, command: Any) -> list[str] | str:
    if isinstance(command, str) and command.strip():
        return command
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        return command
    raise ExternalSystemError(f"{where}: field 'command': expected a non-empty list of strings or a string")


def _env(where: str, env: Any) -> dict[str, str]:
    if not isinstance(env, dict):
        raise ExternalSystemError(f"{where}: field 'env': expected a mapping of variable names to values")
    variables = {}
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
            raise ExternalSystemError(f"{where}: field env: {key!r} is not a variable name (letters, digits, '_')")
        if key.startswith(RESERVED_ENV):
            raise ExternalSystemError(f"{where}: field env.{key}: set by the suite for every agent; choose another")
        if not isinstance(value, str | int | float | bool):
            raise ExternalSystemError(f"{where}: field env.{key}: expected a string")
        text = str(value)
        if "\0" in text:
            raise ExternalSystemError(f"{where}: field env.{key}: a NUL character cannot be in an environment value")
        variables[key] = text
    return variables


def _strings(where: str, field: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ExternalSystemError(f"{where}: field {field!r}: expected a list of strings")
    return value


def _text(where: str, field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ExternalSystemError(f"{where}: field {field!r}: expected a string")
    return value


def _needs_folder(entry: dict[str, Any]) -> bool:
    """Whether the agent uses a folder of files: given, named by a template, or read by its build or copies.
    A folder it never uses is not shown in its sandbox (nor must it be readable by the agent's user)."""
    command = entry.get("command")
    parts = [command] if isinstance(command, str) else command if isinstance(command, list) else []
    env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
    templates = [*parts, *env.values(), entry.get("build") or ""]
    named = any("{agent_dir}" in str(text) for text in templates)
    return named or bool(entry.get("agent_dir") or entry.get("agent_files") or entry.get("build"))


def _agent_dir(where: str, path: Path, value: Any) -> Path:
    """The agent's folder, relative to the YAML file (its folder by default), absolute and existing."""
    if value is None:
        return path.parent
    if not isinstance(value, str) or not value:
        raise ExternalSystemError(f"{where}: field 'agent_dir': expected a folder's path (relative to this file)")
    folder = (path.parent / value).resolve()
    if not folder.is_dir():
        raise ExternalSystemError(f"{where}: field 'agent_dir': {folder} is not a folder")
    return folder


def _agent_files(where: str, agent_dir: Path, value: Any) -> list[str]:
    names = _strings(where, "agent_files", value) or []
    for name in names:
        if not (agent_dir / name).is_file() or ".." in Path(name).parts or Path(name).is_absolute():
            raise ExternalSystemError(f"{where}: field agent_files: {name!r} is not a file of {agent_dir}")
    return names

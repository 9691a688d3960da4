"""What every verb shares: the two consoles, the one-line error (exit 2), exit codes, and `command_of`, which
turns a verb's options dataclass into its command line."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from ..terminal import TerminalConsole

if TYPE_CHECKING:
    from ...core.benchmark import Benchmark

# Both strip escape sequences from what they print: messages quote servers, agents and datasets (issue 26).
console = TerminalConsole(stderr=True)  # messages, warnings, progress

# Options that `resume` and `replay` both take (one declaration, one help text).
PostgresUrlAgain = typing.Annotated[
    str | None, typer.Option(help="The run's PostgreSQL server again (its password is not recorded).")
]
AllowDrift = typing.Annotated[
    bool,
    typer.Option(
        "--allow-drift",
        help="Go on although code, plugins, scorers or data changed since the run (recorded in the manifest).",
    ),
]
output = TerminalConsole()  # what a command prints as its result (tables, JSON)

EXIT_WRITE_FAILED = 74  # sysexits' EX_IOERR
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM

Options = TypeVar("Options")


def fail(message: str, code: int = 2) -> typer.Exit:
    """One line `error: ...` on stderr (credentials redacted); raise what it returns."""
    from ...core.runlog import redact_credentials

    text = redact_credentials(message).replace("[", "\\[")  # a message is text, not Rich markup
    console.print(f"[red]error:[/red] {text}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def command_of(options_type: type[Options], body: Callable[[Options], None]) -> Callable[..., None]:
    """A typer command whose parameters are the fields of the dataclass `options_type` (each annotated with its
    typer.Option or typer.Argument): the command line builds one options object and hands it to `body`. A flag
    is then one field, in one place."""
    hints = typing.get_type_hints(options_type, include_extras=True)
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter(field.name, keyword, default=_default(field), annotation=hints[field.name])
        for field in dataclasses.fields(options_type)  # type: ignore[arg-type]
    ]

    def command(**given: Any) -> None:
        body(options_type(**given))

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {}  # typer reads the signature's annotations
    command.__doc__ = body.__doc__
    command.__name__ = body.__name__
    return command


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return inspect.Parameter.empty


def split(value: str | None) -> list[str] | None:
    """`a, b,,c` → ['a', 'b', 'c']; nothing given → None."""
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def load_plugins(plugins: list[str] | None) -> None:
    from ...engine.config import ConfigError
    from ...engine.config import load_plugins as load

    try:
        load(plugins or [])
    except ConfigError as problem:
        raise fail(str(problem)) from None


def benchmark_at(name: str, path: Path | None, **options: Any) -> Benchmark:
    """The named benchmark on its files; an unknown name or unreadable files: exit 2."""
    from ...core.benchmark import BenchmarkError, create_benchmark
    from ...core.registry import RegistryError

    try:
        return create_benchmark(name, path, **options)
    except (RegistryError, BenchmarkError) as problem:
        raise fail(str(problem)) from None

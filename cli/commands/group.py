"""How a command line finds its verb: `compare` with no verb runs a comparison (`compare run`), and the old
mode flags name their verbs — `compare --resume --out DIR` is `compare resume DIR`, `compare --replay RUN`
is `compare replay RUN`. A first word that is neither a verb nor an option is refused, naming the verbs (even
before --help: `compare UNKNOWN --help` is not `compare run --help`). A verb given a flag it does not take says
which verb that flag belongs to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typer.core import TyperCommand, TyperGroup

from .common import fail

if TYPE_CHECKING:
    from typer._click.core import Context  # typer's own click, which its commands' methods take

DEFAULT_VERB = "run"
ALIAS = "alias"  # ctx.meta key: the old flag the verb was named by, for messages in the user's own words


class VerbGroup(TyperGroup):
    """The root command: its verbs, `run` when none is named, and `--resume`/`--replay` as verbs. Its help
    lists the verbs and, under them, the options of `compare run`."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        verb, rest = self._verb(args)
        alias, rest = _old_mode(rest) if verb == DEFAULT_VERB else (None, rest)
        if alias:
            ctx.meta[ALIAS] = alias[0]
            verb, rest = alias[1], rest
        return super().parse_args(ctx, [verb, *rest] if verb else rest)

    def _verb(self, args: list[str]) -> tuple[str | None, list[str]]:
        if args[:1] == ["--help"]:
            return None, args  # the root's own help
        if args and args[0] in self.commands:
            return args[0], args[1:]
        if args and not args[0].startswith("-"):  # `compare run` takes options only: a first word must be a verb
            raise fail(self._unknown_verb(args[0]))
        return DEFAULT_VERB, args

    def _unknown_verb(self, word: str) -> str:
        from difflib import get_close_matches

        near = get_close_matches(word, self.commands, n=1)
        return (
            f"unknown verb {word!r}{f' (did you mean {near[0]!r}?)' if near else ''}: the verbs are"
            f" {', '.join(self.commands)}; with no verb, compare takes the options of compare {DEFAULT_VERB}"
            " (compare --help)"
        )

    def format_epilog(self, ctx: Context, formatter: Any) -> None:
        run = self.commands.get(DEFAULT_VERB)
        if run is not None:
            params = [param for param in run.get_params(ctx) if param.name != "help"]
            records = [record for param in params if (record := param.get_help_record(ctx))]
            with formatter.section(f"Options of compare {DEFAULT_VERB} (compare with no verb)"):
                formatter.write_dl(records)
        super().format_epilog(ctx, formatter)


def _old_mode(args: list[str]) -> tuple[tuple[str, str] | None, list[str]]:
    """(the old flag, [verb, RUN_DIR]) and the other arguments, when `--replay RUN` or `--resume` is given."""
    replay = _take(args, "--replay", with_value=True)
    if replay is not None:
        value, rest = replay
        return ("--replay", "replay"), [value, *rest] if value is not None else rest
    resume = _take(args, "--resume", with_value=False)
    if resume is None:
        return None, args
    _, rest = resume
    out = _take(rest, "--out", with_value=True)
    if out is None or out[0] is None:
        raise fail("--resume needs --out DIR (the run directory to finish); or: compare resume DIR")
    return ("--resume", "resume"), [out[0], *out[1]]


def _take(args: list[str], flag: str, *, with_value: bool) -> tuple[str | None, list[str]] | None:
    """(its value, the arguments without it) of the first `flag` (or `flag=value`); None when not given."""
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        if arg == flag:
            value = args[index + 1] if with_value and index + 1 < len(args) else None
            end = index + (2 if with_value and value is not None else 1)
            return value, args[:index] + args[end:]
        if with_value and arg.startswith(flag + "="):
            return arg.split("=", 1)[1], args[:index] + args[index + 1 :]
    return None


# The flags of one verb given to another: where they belong (said instead of click's "No such option").
BELONGS_ELSEWHERE = {
    "--allow-drift": "--allow-drift goes with --resume or --replay (a new run has nothing to drift from)",
    "--retry-errors": "--retry-errors goes with --resume --out RUN (it runs a finished run's infra errors again);"
    " or: compare resume RUN --retry-errors",
}


class VerbCommand(TyperCommand):
    """A verb whose unknown flags are named together, with the verb they belong to where there is one."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        unknown = self.unknown_flags(args)
        if unknown:
            self.refuse(ctx, unknown)
        return super().parse_args(ctx, args)

    def unknown_flags(self, args: list[str]) -> list[str]:
        known = {name for param in self.params for name in (*param.opts, *param.secondary_opts)} | {"--help"}
        given = [arg.split("=", 1)[0] for arg in args[: args.index("--") if "--" in args else len(args)]]
        return [flag for flag in given if flag.startswith("--") and flag not in known]

    def refuse(self, ctx: Context, unknown: list[str]) -> None:
        for flag in unknown:
            if flag in BELONGS_ELSEWHERE:
                raise fail(BELONGS_ELSEWHERE[flag])
        # anything else: click's own message, with its suggestion of a near flag name


class RecordedRunCommand(VerbCommand):
    """`resume` and `replay` run with the recorded configuration of a run: a flag of a new run is refused
    together with every other one given, and the flags the verb does take are listed."""

    def refuse(self, ctx: Context, unknown: list[str]) -> None:
        mode = ctx.meta.get(ALIAS) or f"compare {self.name}"
        takes = sorted(name for param in self.params for name in param.opts if name.startswith("--"))
        raise fail(
            f"{mode} runs with the recorded configuration of the run and takes no {', '.join(unknown)}"
            f" (only {', '.join(takes)}); to change the configuration, start a new run with another --out"
        )

"""Core of the data-agent comparison suite: task, trace, model gateway, tools, runner, CLI.

Where each concept lives:
    task      compare/task.py      Task, Gold, Answer
    trace     compare/trace.py     Trace, steps, phases, budgets
    model     compare/model.py     the metered model gateway; providers in compare/providers/
    tool      compare/tools/       Tool, ToolEnvironment and the built-in tools
    system    compare/system.py    System base class and registry (workflows/ and systems/ subclass it)
    run       compare/run.py       run plan, execution, run directory
    cli       compare/cli.py       the `compare` command
"""

__version__ = "0.1.0"

"""The `compare` command's verbs, one module each (run, resume, replay, report, score, rescore, import, tasks,
systems, benchmarks, models), each with a typed options object; `cli/main.py` puts them together.

Like `cli/main.py`, these modules import only typer and rich at the top: `compare --help` builds every verb
and must not pay for the core's pydantic models (tests/app/test_startup.py). A verb imports what it uses."""

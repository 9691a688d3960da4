"""Benchmarks: one `Benchmark` (core/benchmark.py) per benchmark, each in its own module.

    bundled     tasks/bundled/   the suite's own offline benchmark (data, generator, loader)
    fdabench    tasks/fdabench.py
    dabstep     tasks/dabstep.py
    dab         tasks/dab.py
    dbgorilla   tasks/dbgorilla.py

Each is registered by name in pyproject.toml (entry points `data_agent_compare.benchmarks`), and
nothing outside its module asks which benchmark a task belongs to. `records.py` holds the file
readers the loaders share. README "Add a benchmark" shows a sixth one as one new module.
"""

"""The application on top: the runner (`runner.py`), one unit of a run (`units.py`), the
executors (`executors.py`, `ray_executor.py`), run configuration (`config.py`) and the
`compare` command (`cli.py`). It knows systems, benchmarks, providers and scorers only by name."""

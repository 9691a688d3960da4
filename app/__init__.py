"""The application on top: the runner (`runner.py`), run configuration (`config.py`) and the
`compare` command (`cli.py`). It knows systems, benchmarks, providers and scorers only by name."""

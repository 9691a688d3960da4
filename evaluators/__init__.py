"""Scorers of (task, answer, trace), each registered by name; a benchmark lists those that apply.

| scorer         | metric keys                                    | module         | used by            |
|----------------|------------------------------------------------|----------------|--------------------|
| `exact_match`  | exact_match (+ jaccard for multiple choice)    | exact_match.py | bundled, fdabench  |
| `dabstep`      | correct, correct_strict                        | dabstep.py     | dabstep            |
| `dab`          | correct (validate.py / ground truth)           | dab.py         | dab                |
| `dbgorilla`    | ast_score, exact_match, collection_routing, …  | dbgorilla.py   | dbgorilla          |
| `rouge`        | rouge1_f, rougeL_f                             | lexical.py     | bundled, fdabench  |
| `rubric`       | rs, sql_acc, … (LLM judge with --judge)        | rubric.py      | bundled, fdabench  |
| `tool_dag`     | tos, gc, tq, tf, ss, sr (against a gold DAG)   | dag.py         | bundled, fdabench  |
| `tool_success` | sr (successful / all tool calls)               | dag.py         | every benchmark    |

The names are registered in pyproject.toml (entry points `data_agent_compare.scorers`);
`core.scorer.score` runs a list of them. `statistics.py` holds the intervals and paired
tests the reports use; `predictions.py` reads prediction files made elsewhere.
"""

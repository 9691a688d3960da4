"""FDABench's tool orchestration score (TOS) of an agent's tool calls against a gold DAG.

Gold DAG (`gold_dag`). `task.gold.dag` when present; otherwise one derived from the
FDABench `gold_subtasks` in `task.metadata` (a list of dicts, or the Python-literal
string of the published files): one node per subtask (id = subtask_id, tool = its
`tool`, type = its `type` or else its subtask_id), every node required. If any
subtask carries `depends_on` (a list, a literal list or one id), each dependency is
a HARD_DEP edge, the subtasks before the first one that carries `depends_on` are
chained in order and later ones without it are roots (FDABench's DAGBuilder);
otherwise the list is a linear HARD_DEP chain. Either DAG is then normalized
(`normalize_dag`, idempotent):
- tools are mapped onto canonical names by `tool_aliases.yaml`; a node without a
  tool gets one from its type, else its id (`node_types`, then the aliases), so an
  FDABench "synthesize"/"report" node becomes an `answer` node;
- a DAG without a `critical_path` gets FDABench's (`TaskDAG.compute_critical_path`):
  the longest HARD_DEP path from an entry node (no incoming edge of any type), on
  ties the first successor in edge order and the first entry in gold order; its
  nodes are flagged critical too (flags are never scored, the path is).

TOS is what FDABench's own DAGEvaluator computes (fdabench/FDAbench,
FDABench/evaluation/dag_evaluator.py at commit 0406d46, with PUDDING/models/dag_models.py
and PUDDING/tools/dag_builder.py), rule for rule; the only differences are in what it is
given, stated here, and our extra `coverage`:

Input. FDABench's evaluator reads `tools_executed`, the tools an agent ran (its agents list
the tools that succeeded; with no `execution_order` given, that list is also the order). From
our trace it is the successful calls in call order, each mapped through `tool_aliases.yaml`
(which contains FDABench's own alias table, so its normalisation is one of ours), an
execute_sql call that no generated_sql call prepared counting as generated_sql then
execute_sql where the gold has a generated_sql step (our agents write the SQL as the
execute_sql call's argument: tool_aliases.yaml, `expands`), and `answer` calls left out
where the gold has no answer step (FDABench's agents have no answer tool, so their lists
never hold one). Failed calls count in SR only.

Matching (its `_match_execution_to_nodes`). Each executed tool in order is given to the first
gold node, in gold order, that has its tool, is unmatched and has every HARD_DEP predecessor
already matched; failing that, to the first unmatched node of its tool anyway ("for coverage
counting"); failing that, to nothing. Greedy, so an extra early call of a gold tool can take a
step and break the order: that is the official rule.

Scores (its `_compute_graph_coverage`, `_compute_tool_metrics`, `_check_dependency_violations`,
`compute_composite_score`):
- GC = ½(|matched ∩ required|/|required| + |matched ∩ critical_path|/|critical_path|), each 1
  when its set is empty. Only the `critical_path` list counts, not the nodes' critical flags;
  ALT groups give no credit (FDABench computes their satisfaction and never uses it), nor
  relief in SS: where every alternative is a HARD_DEP predecessor of a later step (the
  bundled DAGs' rate_sql | rate_python → answer), doing one alternative leaves SS 0.
- TF = F1 of SETS of tool names: expected = the tools of every gold node (required or not),
  executed = the tools run; TP = both, FN = expected only, FP = executed only; precision and
  recall are 0 with an empty denominator, F1 0 when both are 0. Repeats cost nothing; an
  operator that is no gold tool is one false positive however often it runs.
- SS = 0 if some HARD_DEP edge u→v has v matched and u unmatched or matched later, else 1: a
  step whose required predecessor never ran breaks the order (an answer-only trace on
  schema → sql → answer: GC ⅓, F1 ½, SS 0, TOS 1/6).
- TQ = TF·SS; TOS = ½·GC + ½·TQ; SR = successful calls / all calls as given (not expanded;
  0 without calls, in `tool_dag` and `tool_success` alike).
- coverage (ours, beside TOS) = |covered ∩ work| / |work|, work = the required gold nodes
  other than the answer node, covered = matched plus the other members of a satisfied ALT
  group (absent when the gold has no such node). TOS can credit little work — an answer-only
  trace still gets GC ⅓ on schema → sql → answer — and coverage says what was done.

Where we depart from the official code, on purpose:
- The official critical path of a DAG built from subtasks takes, on ties between entry nodes,
  whichever a Python set yields first (it can change between processes); ours takes the first
  in gold order. A gold DAG given with a `critical_path` keeps it, as its `TaskDAG.from_dict` does;
  one given without gets the path `DAGBuilder.build` computes (from_dict would keep it empty and
  count critical-path coverage 1; the DAGs FDABench stores were built, so they carry theirs).
- `tool_aliases.yaml` also gives a gold node without a tool one by its type: an FDABench
  "synthesize"/"report" step is done by our `answer` call (FDABench's agents call no tool for it).
- A `depends_on` given as one id or a literal string is parsed; the official builder iterates
  the string's characters (and then fails on the unknown ids).
"""

from __future__ import annotations

import ast
from functools import cache
from itertools import pairwise, takewhile
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, reports, versioned
from ..core.task import AltGroup, Answer, DagEdge, DagNode, EdgeType, GoldDag, Task
from ..core.trace import Trace

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("networkx",)


ALIASES_FILE = Path(__file__).with_name("tool_aliases.yaml")
ANSWER = "answer"


# ---------------------------------------------------------------- aliases


def _key(name: str) -> str:
    return name.strip().casefold()


class ToolAliases(BaseModel):
    """The alias table of tool_aliases.yaml, keyed by case-folded name."""

    names: dict[str, str]  # any known name -> canonical tool
    expands: dict[str, str]  # canonical tool -> the step its call also does (execute_sql: generated_sql)
    node_types: dict[str, str]  # gold node type -> tool, for nodes that name none

    def canonical(self, name: str) -> str:
        return self.names.get(_key(name), name.strip())


@cache
def tool_aliases() -> ToolAliases:
    raw = yaml.safe_load(ALIASES_FILE.read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for canonical, others in raw["aliases"].items():
        for name in [canonical, *(others or [])]:
            if names.setdefault(_key(name), canonical) != canonical:
                raise ValueError(f"{ALIASES_FILE.name}: {name!r} maps to {names[_key(name)]!r} and {canonical!r}")
    return ToolAliases(
        names=names,
        expands=dict(raw["expands"]),
        node_types={_key(kind): tool for kind, tool in raw["node_types"].items()},
    )


# ---------------------------------------------------------------- gold DAG


def gold_dag(task: Task) -> GoldDag | None:
    """The task's normalized gold DAG, or None when it has none (or an empty one)."""
    dag = task.gold.dag if task.gold else None
    if dag is None:
        subtasks = _gold_subtasks(task)
        dag = _from_subtasks(task.id, subtasks) if subtasks else None
    return normalize_dag(dag) if dag and dag.nodes else None


def _literal(value: Any) -> Any:
    """A Python-literal string parsed (the published FDABench quirk); anything else as is."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def _gold_subtasks(task: Task) -> list[dict[str, Any]] | None:
    raw = task.metadata.get("gold_subtasks")
    value = None if isinstance(raw, str) and not raw.strip() else _literal(raw)
    if value is not None and not (isinstance(value, list) and all(isinstance(s, dict) for s in value)):
        raise ValueError(f"task {task.id}: field gold_subtasks is not a list of subtask dicts")
    return value


def _subtask_node(task_id: str, position: int, subtask: dict[str, Any]) -> DagNode:
    node_id = subtask.get("subtask_id") or subtask.get("tool")
    if not node_id:
        raise ValueError(f"task {task_id}: gold_subtasks[{position}] has no subtask_id")
    result = subtask.get("expected_result")
    return DagNode(
        id=str(node_id),
        type=str(subtask.get("type") or node_id),
        tool=subtask.get("tool") or None,
        description=str(subtask.get("description") or ""),
        input=_input(subtask.get("input")),
        expected_sql=subtask.get("expected_SQL") or subtask.get("expected_sql"),
        expected_result=None if result is None else str(result),
    )


def _input(value: Any) -> dict[str, Any] | None:
    value = _literal(value)
    if value is None or isinstance(value, dict):
        return value
    return {"text": value}  # free text: kept for reference, never scored


def _depends_on(subtask: dict[str, Any]) -> list[str]:
    value = _literal(subtask.get("depends_on"))
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _from_subtasks(task_id: str, subtasks: list[dict[str, Any]]) -> GoldDag:
    nodes = [_subtask_node(task_id, i, subtask) for i, subtask in enumerate(subtasks)]
    ids = [node.id for node in nodes]
    if len(set(ids)) != len(ids):
        raise ValueError(f"task {task_id}: gold_subtasks repeat a subtask_id: {ids}")
    if any("depends_on" in subtask for subtask in subtasks):
        pairs = [(dep, node.id) for node, subtask in zip(nodes, subtasks, strict=True) for dep in _depends_on(subtask)]
        leading = [
            node.id
            for node, _ in takewhile(lambda pair: "depends_on" not in pair[1], zip(nodes, subtasks, strict=True))
        ]
        pairs += list(pairwise(leading))  # DAGBuilder chains the subtasks before the first with depends_on
    else:
        pairs = list(pairwise(ids))
    unknown = sorted({source for source, _ in pairs} - set(ids))
    if unknown:
        raise ValueError(f"task {task_id}: gold_subtasks depends_on unknown subtask ids {unknown}")
    return GoldDag(nodes=nodes, edges=[DagEdge(source=s, target=t) for s, t in pairs])


def _node_tool(node: DagNode) -> str | None:
    aliases = tool_aliases()
    if node.tool:
        return aliases.canonical(node.tool)
    for key in (_key(node.type), _key(node.id)):
        tool = aliases.node_types.get(key) or aliases.names.get(key)
        if tool:
            return tool
    return None


def normalize_dag(dag: GoldDag) -> GoldDag:
    """Canonical tools, critical flags and path filled in (module docstring)."""
    nodes = [
        node.model_copy(update={"tool": _node_tool(node), "critical": node.critical or node.id in dag.critical_path})
        for node in dag.nodes
    ]
    path = dag.critical_path
    if not path:
        path = _critical_path(dag)
        nodes = [node.model_copy(update={"critical": node.critical or node.id in path}) for node in nodes]
    return GoldDag(nodes=nodes, edges=dag.edges, critical_path=path, alt_groups=dag.alt_groups)


def _critical_path(dag: GoldDag) -> list[str]:
    """FDABench's TaskDAG.compute_critical_path: the longest HARD_DEP path from an entry node."""
    has_in = {e.target for e in dag.edges}
    hard = {
        node.id: [e.target for e in dag.edges if e.source == node.id and e.type is EdgeType.HARD_DEP]
        for node in dag.nodes
    }
    longest: dict[str, list[str]] = {}

    def path_from(node_id: str) -> list[str]:
        if node_id not in longest:
            best: list[str] = []
            for target in hard[node_id]:  # strictly longer wins: the first of equals in edge order
                if len(path_from(target)) > len(best):
                    best = path_from(target)
            longest[node_id] = [node_id, *best]
        return longest[node_id]

    path: list[str] = []
    for node in dag.nodes:  # FDABench walks a set of entry nodes here (no fixed order): ours is gold order
        if node.id not in has_in and len(path_from(node.id)) > len(path):
            path = path_from(node.id)
    return path


def alt_groups(dag: GoldDag) -> list[AltGroup]:
    """Declared groups, then ALT_GROUP-edge components among undeclared nodes (min_required 1)."""
    import networkx as nx

    declared = list(dag.alt_groups.values())
    covered = {node_id for group in declared for node_id in group.node_ids}
    position = {node.id: i for i, node in enumerate(dag.nodes)}
    graph = nx.Graph()
    graph.add_edges_from(
        (e.source, e.target) for e in dag.edges if e.type is EdgeType.ALT_GROUP and not {e.source, e.target} & covered
    )
    found = [AltGroup(node_ids=sorted(c, key=position.__getitem__)) for c in nx.connected_components(graph)]
    return declared + found


# ---------------------------------------------------------------- scoring


class ToolOrchestration(BaseModel):
    """Every component of TOS for one run (definitions in the module docstring)."""

    matched: dict[str, int]  # gold node id -> position, in the calls given, of the call that did it
    credited: list[str]  # unmatched members of a satisfied ALT group (for coverage only)
    critical_path: list[str]
    violations: list[tuple[str, str]]  # HARD_DEP edges (u, v): v matched, u unmatched or matched later
    gc: float
    precision: float
    recall: float
    tf: float
    ss: float
    tq: float
    tos: float
    sr: float
    coverage: float | None  # share of the required non-answer gold steps done (None: the gold has none)


def _agent_steps(calls: list[tuple[str, bool]], gold_tools: set[str]) -> list[tuple[int, str, bool]]:
    """(position, canonical tool, success) of each call; an execute_sql call that no generated_sql call
    prepared also does generated_sql where the gold has that step (tool_aliases.yaml, `expands`)."""
    aliases = tool_aliases()
    prepared: set[str] = set()  # write steps (generated_sql) done and not yet run
    steps = []
    for position, (name, success) in enumerate(calls):
        tool = aliases.canonical(name)
        also = aliases.expands.get(tool)
        if also is not None:
            if also in gold_tools and also not in prepared:
                steps.append((position, also, success))  # the SQL was written in this call
            prepared.discard(also)
        if success and tool in aliases.expands.values():
            prepared.add(tool)
        steps.append((position, tool, success))
    return steps


def _executed(dag: GoldDag, calls: list[tuple[str, bool]]) -> list[tuple[int, str]]:
    """FDABench's `tools_executed` from our calls, as (position, canonical tool): the successful calls,
    execute_sql expanded, `answer` left out where the gold has no answer step (module docstring)."""
    gold_tools = {node.tool for node in dag.nodes if node.tool}
    return [
        (position, tool)
        for position, tool, success in _agent_steps(calls, gold_tools)
        if success and (ANSWER in gold_tools or tool != ANSWER)
    ]


def _hard_predecessors(dag: GoldDag) -> dict[str, list[str]]:
    return {
        node.id: [e.source for e in dag.edges if e.target == node.id and e.type is EdgeType.HARD_DEP]
        for node in dag.nodes
    }


def _match(dag: GoldDag, executed: list[tuple[int, str]]) -> dict[str, int]:
    """Gold node id -> position of the call that did it, by FDABench's `_match_execution_to_nodes`."""
    before = _hard_predecessors(dag)
    matched: dict[str, int] = {}
    for position, tool in executed:
        free = [node.id for node in dag.nodes if node.tool == tool and node.id not in matched]
        ready = [node_id for node_id in free if all(dep in matched for dep in before[node_id])]
        if free:  # dependencies met first; else the first free node anyway, as FDABench does
            matched[(ready or free)[0]] = position
    return matched


def _violations(dag: GoldDag, matched: dict[str, int]) -> list[tuple[str, str]]:
    """FDABench's `_check_dependency_violations`: a matched step whose HARD_DEP predecessor never ran
    or ran later."""
    return [
        (e.source, e.target)
        for e in dag.edges
        if e.type is EdgeType.HARD_DEP and e.target in matched
        if e.source not in matched or matched[e.source] > matched[e.target]
    ]


def _tool_f1(dag: GoldDag, executed: list[tuple[int, str]]) -> tuple[float, float, float]:
    """(precision, recall, F1) over the sets of tool names, FDABench's `_compute_tool_metrics`."""
    expected = {node.tool or f"<no tool: {node.id}>" for node in dag.nodes}  # a tool no call can name
    ran = {tool for _, tool in executed}
    hits = len(expected & ran)
    precision = hits / len(ran) if ran else 0.0
    recall = hits / len(expected) if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _graph_coverage(dag: GoldDag, matched: dict[str, int]) -> float:
    """½(required coverage + critical-path coverage), each 1 when empty (FDABench's graph score)."""
    required = [node.id for node in dag.nodes if node.required]
    path = dag.critical_path
    required_part = sum(node_id in matched for node_id in required) / len(required) if required else 1.0
    path_part = sum(node_id in matched for node_id in path) / len(path) if path else 1.0
    return (required_part + path_part) / 2


def _credited(groups: list[AltGroup], matched: dict[str, int]) -> set[str]:
    return {
        node_id
        for group in groups
        if sum(n in matched for n in group.node_ids) >= group.min_required
        for node_id in group.node_ids
        if node_id not in matched
    }


def tool_orchestration(dag: GoldDag, calls: list[tuple[str, bool]]) -> ToolOrchestration:
    """TOS and its components for the agent's tool calls, in order, as (tool name, success)."""
    dag = normalize_dag(dag)
    executed = _executed(dag, calls)
    matched = _match(dag, executed)
    violations = _violations(dag, matched)
    precision, recall, tf = _tool_f1(dag, executed)
    ss = 0.0 if violations else 1.0
    gc = _graph_coverage(dag, matched)
    credited = _credited(alt_groups(dag), matched)
    return ToolOrchestration(
        matched=matched,
        credited=sorted(credited),
        critical_path=dag.critical_path,
        violations=violations,
        gc=gc,
        precision=precision,
        recall=recall,
        tf=tf,
        ss=ss,
        tq=tf * ss,
        tos=0.5 * gc + 0.5 * tf * ss,
        sr=success_rate(calls),
        coverage=_work_coverage(dag, set(matched) | credited),
    )


def success_rate(calls: list[tuple[str, bool]]) -> float:
    """Successful calls / all calls; 0 without calls (the rule of both `tool_dag` and `tool_success`)."""
    return sum(success for _, success in calls) / len(calls) if calls else 0.0


def _work_coverage(dag: GoldDag, covered: set[str]) -> float | None:
    work = {node.id for node in dag.nodes if node.required and node.tool != ANSWER}
    return len(work & covered) / len(work) if work else None


def score_dag(task: Task, trace: Trace) -> dict[str, float]:
    """tos, gc, tq, tf, ss, sr and (when defined) coverage of the trace's tool calls; empty when the
    task has no gold DAG."""
    dag = gold_dag(task)
    if dag is None:
        return {}
    result = tool_orchestration(dag, [(step.tool, step.success) for step in trace.tool_calls])
    scores = {"tos": result.tos, "gc": result.gc, "tq": result.tq, "tf": result.tf, "ss": result.ss, "sr": result.sr}
    return scores if result.coverage is None else {**scores, "coverage": result.coverage}


@versioned("3")  # 2: semantic operators aliased, coverage beside TOS; 3: FDABench's DAGEvaluator rule for rule
@reports("tos", "tq", "gc")
def tool_dag_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `tool_dag`: TOS and its parts against the task's gold DAG (nothing without one)."""
    return ScoreResult(score_dag(task, trace))


@versioned("2")  # 2: SR 0 without tool calls, as tool_dag gives
@reports("sr")
def tool_success_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `tool_success`: SR, the share of tool calls that succeeded (0 without calls, as `tool_dag`)."""
    return ScoreResult({"sr": success_rate([(call.tool, call.success) for call in trace.tool_calls])})

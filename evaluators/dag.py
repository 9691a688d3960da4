"""FDABench's tool orchestration score (TOS) of an agent's tool calls against a gold DAG.

Gold DAG (`gold_dag`). `task.gold.dag` when present; otherwise one derived from the
FDABench `gold_subtasks` in `task.metadata` (a list of dicts, or the Python-literal
string of the published files): one node per subtask (id = subtask_id, tool = its
`tool`, type = its `type` or else its subtask_id), every node required. If any
subtask carries `depends_on` (a list, a literal list or one id), each dependency is
a HARD_DEP edge and subtasks without it are roots; otherwise the list is a linear
HARD_DEP chain. Either DAG is then normalized (`normalize_dag`, idempotent):
- tools are mapped onto canonical names by `tool_aliases.yaml`; a node without a
  tool gets one from its type, else its id (`node_types`, then the aliases), so an
  FDABench "synthesize"/"report" node becomes an `answer` node;
- a generated_sql node is folded into the execute_sql step it feeds (see the YAML);
- critical = nodes flagged critical ∪ `critical_path`. A DAG with neither gets the
  longest HARD_DEP path (networkx.dag_longest_path walked in the topological order
  below; on ties the earliest node in gold order wins) as critical path and flags.

Matching. Calls are the agent's (tool name, success) in call order, mapped through
the same aliases; a generated_sql call is folded into the next execute_sql call
(unless another generated_sql call comes first). Failed calls never match: a failed
call did not do the gold step's work; failures count in SR only. Each successful
call matches the earliest gold node, in topological order of the HARD_DEP and
SOFT_DEP edges (ties in gold order), that has its canonical tool, is unmatched, and
is not an alternative of an already satisfied ALT group. The final answer is no
special case: the `answer` call is recorded in the trace like any tool call and
matches a gold node whose canonical tool is `answer`. Caveat of greedy matching: two
gold nodes with the same tool and no path between them are taken in gold order, so
an agent doing them the other way round may be charged an ordering violation.

ALT groups are the declared `alt_groups` plus connected components of ALT_GROUP
edges between nodes of no declared group (min_required 1). A group is satisfied
once min_required of its members are matched; its unmatched members are then
credited: they count as matched for GC's required and critical sets.

Scores (a ratio with an empty denominator is 1: nothing asked, nothing wrong):
- GC = ½(|covered ∩ required|/|required| + |covered ∩ critical|/|critical|),
  covered = matched ∪ credited.
- TF = F1 = 2·TP / (counted calls + gold items). Gold items: 1 per required node
  outside ALT groups, min_required per group with a required member. TP: such
  nodes matched, plus min(matched members, min_required) per such group, so a
  second alternative is a false positive like any spurious call. Counted calls: the
  successful ones, minus neutral ones, which the gold neither asks for nor forbids:
  calls matched to an optional node outside ALT groups or to a member of a group
  with no required member, and `answer` calls when the gold has no answer node
  (FDABench gold_subtasks stop before the answer).
  precision = TP / counted calls, recall = TP / gold items.
- SS = 0 when some HARD_DEP edge u→v has both ends matched and v's call before u's,
  else 1. A required u that was never called is no ordering violation: GC and TF
  already charge for the missing step; SS judges the order of what was done.
- TQ = TF·SS; TOS = ½(GC + TQ); SR = successful calls / all calls as given (before
  folding; 0 without calls).
"""

from __future__ import annotations

import ast
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import networkx as nx
import yaml
from pydantic import BaseModel

from ..compare.model import MeteredModel
from ..compare.scorer import Scores
from ..compare.task import AltGroup, Answer, DagEdge, DagNode, EdgeType, GoldDag, Task
from ..compare.trace import Trace

ALIASES_FILE = Path(__file__).with_name("tool_aliases.yaml")
ANSWER = "answer"
_ORDER_EDGES = {EdgeType.HARD_DEP, EdgeType.SOFT_DEP}


# ---------------------------------------------------------------- aliases


def _key(name: str) -> str:
    return name.strip().casefold()


class ToolAliases(BaseModel):
    """The alias table of tool_aliases.yaml, keyed by case-folded name."""

    names: dict[str, str]  # any known name -> canonical tool
    folds: dict[str, str]  # name -> canonical tool of the step it is folded into
    node_types: dict[str, str]  # gold node type -> tool, for nodes that name none

    def canonical(self, name: str) -> str:
        return self.names.get(_key(name), name.strip())

    def folds_into(self, name: str) -> str | None:
        return self.folds.get(_key(name))


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
        folds={_key(name): target for name, target in raw["folds"].items()},
        node_types={_key(kind): tool for kind, tool in raw["node_types"].items()},
    )


def canonical_tool(name: str) -> str:
    """The canonical name of a tool; unknown names are returned stripped, unchanged."""
    return tool_aliases().canonical(name)


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
    """Canonical tools, generated_sql folded, critical flags and path filled in (module docstring)."""
    dag = _fold(dag)
    nodes = [
        node.model_copy(update={"tool": _node_tool(node), "critical": node.critical or node.id in dag.critical_path})
        for node in dag.nodes
    ]
    path = dag.critical_path
    if not path:
        flagged = {node.id for node in nodes if node.critical}
        path = _longest_hard_path(dag, flagged or {node.id for node in nodes})
        nodes = [node.model_copy(update={"critical": node.critical or node.id in path}) for node in nodes]
    return GoldDag(nodes=nodes, edges=dag.edges, critical_path=path, alt_groups=dag.alt_groups)


def _fold(dag: GoldDag) -> GoldDag:
    for node in dag.nodes:
        target = _fold_target(dag, node)
        if target is not None:
            return _fold(_merge(dag, node, target))
    return dag


def _fold_target(dag: GoldDag, node: DagNode) -> DagNode | None:
    into = tool_aliases().folds_into(node.tool or "")
    if into is None or node.id in _grouped(dag):
        return None
    successors = {e.target for e in dag.edges if e.source == node.id and e.type is EdgeType.HARD_DEP}
    return next((n for n in dag.nodes if n.id in successors and _node_tool(n) == into), None)


def _merge(dag: GoldDag, folded: DagNode, target: DagNode) -> GoldDag:
    merged = target.model_copy(
        update={
            "expected_sql": target.expected_sql or folded.expected_sql,
            "required": target.required or folded.required,
            "critical": target.critical or folded.critical,
        }
    )

    def rename(node_id: str) -> str:
        return target.id if node_id == folded.id else node_id

    edges: list[DagEdge] = []
    for edge in dag.edges:
        moved = DagEdge(source=rename(edge.source), target=rename(edge.target), type=edge.type)
        if moved.source != moved.target and moved not in edges:
            edges.append(moved)
    nodes = [merged if n.id == target.id else n for n in dag.nodes if n.id != folded.id]
    path = list(dict.fromkeys(rename(node_id) for node_id in dag.critical_path))
    return GoldDag(nodes=nodes, edges=edges, critical_path=path, alt_groups=dag.alt_groups)


def _graph(dag: GoldDag, types: set[EdgeType]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(node.id for node in dag.nodes)
    graph.add_edges_from((e.source, e.target) for e in dag.edges if e.type in types)
    return graph


def topological_order(dag: GoldDag) -> list[str]:
    """Node ids in the order matching walks them: HARD_DEP and SOFT_DEP respected, ties in gold order."""
    position = {node.id: i for i, node in enumerate(dag.nodes)}
    try:
        return list(nx.lexicographical_topological_sort(_graph(dag, _ORDER_EDGES), key=position.__getitem__))
    except nx.NetworkXUnfeasible as error:
        raise ValueError("gold DAG has a cycle in its HARD_DEP/SOFT_DEP edges") from error


def _longest_hard_path(dag: GoldDag, among: set[str]) -> list[str]:
    hard = _graph(dag, {EdgeType.HARD_DEP}).subgraph(among)
    return nx.dag_longest_path(hard, topo_order=[i for i in topological_order(dag) if i in among])


def alt_groups(dag: GoldDag) -> list[AltGroup]:
    """Declared groups, then ALT_GROUP-edge components among undeclared nodes (min_required 1)."""
    declared = list(dag.alt_groups.values())
    covered = {node_id for group in declared for node_id in group.node_ids}
    position = {node.id: i for i, node in enumerate(dag.nodes)}
    graph = nx.Graph()
    graph.add_edges_from(
        (e.source, e.target) for e in dag.edges if e.type is EdgeType.ALT_GROUP and not {e.source, e.target} & covered
    )
    found = [AltGroup(node_ids=sorted(c, key=position.__getitem__)) for c in nx.connected_components(graph)]
    return declared + found


def _grouped(dag: GoldDag) -> set[str]:
    return {node_id for group in alt_groups(dag) for node_id in group.node_ids}


# ---------------------------------------------------------------- scoring


class ToolOrchestration(BaseModel):
    """Every component of TOS for one run (definitions in the module docstring)."""

    matched: dict[str, int]  # gold node id -> position, in the calls given, of the call that did it
    credited: list[str]  # unmatched nodes covered by a satisfied ALT group
    critical_path: list[str]
    violations: list[tuple[str, str]]  # HARD_DEP edges (u, v) whose v was called before u
    gc: float
    precision: float
    recall: float
    tf: float
    ss: float
    tq: float
    tos: float
    sr: float


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 1.0


def _agent_steps(calls: list[tuple[str, bool]]) -> list[tuple[int, str, bool]]:
    """(position, canonical tool, success) of each call, generated_sql folded away."""
    aliases = tool_aliases()
    steps = []
    for position, (name, success) in enumerate(calls):
        into = aliases.folds_into(name)
        if into and _runs_later(calls[position + 1 :], into):
            continue  # the SQL written here is run by a later call: one step
        steps.append((position, aliases.canonical(name), success))
    return steps


def _runs_later(rest: list[tuple[str, bool]], tool: str) -> bool:
    aliases = tool_aliases()
    for name, _ in rest:
        if aliases.folds_into(name):
            return False  # other SQL was written before any ran
        if aliases.canonical(name) == tool:
            return True
    return False


def _credited(groups: list[AltGroup], matched: dict[str, int]) -> set[str]:
    return {
        node_id
        for group in groups
        if sum(n in matched for n in group.node_ids) >= group.min_required
        for node_id in group.node_ids
        if node_id not in matched
    }


def _match(dag: GoldDag, groups: list[AltGroup], steps: list[tuple[int, str, bool]]) -> dict[str, int]:
    tools = {node.id: node.tool for node in dag.nodes}
    order = topological_order(dag)
    matched: dict[str, int] = {}
    for position, tool, success in steps:
        if not success:
            continue
        settled = _credited(groups, matched)  # alternatives no longer waiting for a call
        node = next((n for n in order if tools[n] == tool and n not in matched and n not in settled), None)
        if node is not None:
            matched[node] = position
    return matched


def _coverage(dag: GoldDag, covered: set[str]) -> float:
    required = {node.id for node in dag.nodes if node.required}
    critical = {node.id for node in dag.nodes if node.critical}
    return (_ratio(len(covered & required), len(required)) + _ratio(len(covered & critical), len(critical))) / 2


def _f1_counts(
    dag: GoldDag, groups: list[AltGroup], matched: dict[str, int], steps: list[tuple[int, str, bool]]
) -> tuple[int, int, int]:
    """(true positives, counted calls, gold items) of the tool F1."""
    required = {node.id for node in dag.nodes if node.required}
    grouped = {node_id for group in groups for node_id in group.node_ids}
    units = [(group.node_ids, min(group.min_required, len(group.node_ids))) for group in groups]
    units += [([node.id], 1) for node in dag.nodes if node.id not in grouped]
    true_positives = items = neutral = 0
    for node_ids, size in units:
        hits = sum(node_id in matched for node_id in node_ids)
        if required.intersection(node_ids):
            items += size
            true_positives += min(hits, size)
        else:
            neutral += hits
    successful = [tool for _, tool, success in steps if success]
    if not any(node.tool == ANSWER for node in dag.nodes):
        neutral += successful.count(ANSWER)
    return true_positives, len(successful) - neutral, items


def tool_orchestration(dag: GoldDag, calls: list[tuple[str, bool]]) -> ToolOrchestration:
    """TOS and its components for the agent's tool calls, in order, as (tool name, success)."""
    dag = normalize_dag(dag)
    groups = alt_groups(dag)
    steps = _agent_steps(calls)
    matched = _match(dag, groups, steps)
    credited = _credited(groups, matched)
    true_positives, counted, items = _f1_counts(dag, groups, matched, steps)
    tf = _ratio(2 * true_positives, counted + items)
    violations = [
        (e.source, e.target)
        for e in dag.edges
        if e.type is EdgeType.HARD_DEP and e.source in matched and e.target in matched
        if matched[e.target] < matched[e.source]
    ]
    ss = 0.0 if violations else 1.0
    gc = _coverage(dag, set(matched) | credited)
    return ToolOrchestration(
        matched=matched,
        credited=sorted(credited),
        critical_path=dag.critical_path,
        violations=violations,
        gc=gc,
        precision=_ratio(true_positives, counted),
        recall=_ratio(true_positives, items),
        tf=tf,
        ss=ss,
        tq=tf * ss,
        tos=(gc + tf * ss) / 2,
        sr=sum(success for _, success in calls) / len(calls) if calls else 0.0,
    )


def score_dag(task: Task, trace: Trace) -> dict[str, float]:
    """tos, gc, tq, tf, ss and sr of the trace's tool calls; empty when the task has no gold DAG."""
    dag = gold_dag(task)
    if dag is None:
        return {}
    result = tool_orchestration(dag, [(step.tool, step.success) for step in trace.tool_calls])
    return {"tos": result.tos, "gc": result.gc, "tq": result.tq, "tf": result.tf, "ss": result.ss, "sr": result.sr}


def tool_dag_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores:
    """Scorer `tool_dag`: TOS and its parts against the task's gold DAG (nothing without one)."""
    return dict(score_dag(task, trace))


def tool_success_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores:
    """Scorer `tool_success`: SR, the share of tool calls that succeeded (nothing without calls)."""
    calls = trace.tool_calls
    return {"sr": sum(call.success for call in calls) / len(calls)} if calls else {}

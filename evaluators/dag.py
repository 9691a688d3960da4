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
call did not do the gold step's work; failures count in SR only. A valid matching
gives gold nodes distinct successful calls of their canonical tool, and no ALT group
(below) more than min_required matched members: a satisfied group's other
alternatives take no call, so a further alternative is a spurious call. The final
answer is no special case: the `answer` call is recorded in the trace like any tool
call and matches a gold node whose canonical tool is `answer`. Of all valid
matchings, the one scored
1. matches the most gold nodes;
2. among those, breaks no HARD_DEP order (an edge u→v with both ends matched and
   v's call before u's) if any of them does: SS is 0 only when every largest
   matching breaks one (a real reversal), never because an extra call of a gold
   tool was taken for the step;
3. then has the highest GC + TF (a call of a tool that a required and an optional
   node share does the required node's work);
4. then takes the earliest calls: the call positions, listed in topological order
   of the HARD_DEP and SOFT_DEP edges (ties in gold order), are lexicographically
   smallest, an unmatched node counting as later than every call.
Only direct HARD_DEP edges order calls: with w unmatched in u→w→v, u and v may
come either way round.

Search (exact). What later calls can add to a partial matching depends only on the
set of nodes it covers (a node whose HARD_DEP successor is matched can no longer be
matched in order), so one pass over the calls keeps, per node set, the earliest
matching covering it, and drops sets that cannot grow to the size sought (per tool,
no more nodes than calls left; per ALT group, no more than min_required). The
largest size order aside comes first, from one stand-in call per node a tool's
calls can serve; a pass over the calls keeping HARD_DEP orders then looks for
matchings of that size, and without one rule 2 falls back to those order aside.
Nodes alike in all that the scores see (tool, flags, ALT groups; keeping order,
HARD_DEP neighbours too) take their calls in topological order, which loses no
best matching. n gold nodes have at most 2^n node sets, so every DAG of up to 12
nodes is matched exactly (MAX_STATES = 4,096 sets; work ≤ calls × sets × nodes of
the called tool: with 100 calls, measured under 0.2 s up to 10 nodes and about
0.6 s for 12 nodes of one tool). A larger DAG is matched exactly while a pass holds
at most MAX_STATES node sets; beyond that scoring raises ValueError (the scorer
records the error): TOS is never approximated.

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
- SS = 0 when some HARD_DEP edge u→v has both ends matched and v's call before u's
  (by rule 2, only when no largest matching keeps every order), else 1. A required
  u that was never called is no ordering violation: GC and TF already charge for
  the missing step; SS judges the order of what was done.
- TQ = TF·SS; TOS = ½(GC + TQ); SR = successful calls / all calls as given (before
  folding; 0 without calls, in `tool_dag` and `tool_success` alike: a task without a tool call
  stays in the SR mean of every benchmark).
- coverage = |covered ∩ work| / |work|, work = the required gold nodes other than the answer
  node (absent when the gold has none). Shown beside TOS because TOS, like FDABench's own
  evaluator, gives credit for little work: on a gold DAG with an `answer` node, a trace whose only
  call is `answer` covers that required, critical node (GC ⅓ of schema → sql → answer, TF ½:
  TOS 0.417) while its coverage is 0. FDABench's evaluator (FDABench/evaluation/dag_evaluator.py)
  gives an empty trace, an answer-only trace and a trace of semantic operators alone TOS 0 on its
  own gold DAGs (no answer node), as this module does (tests/evaluators/test_dag.py).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel

from ..compare.model import MeteredModel
from ..compare.scorer import Scores, reports, versioned
from ..compare.task import AltGroup, Answer, DagEdge, DagNode, EdgeType, GoldDag, Task
from ..compare.trace import Trace

if TYPE_CHECKING:
    import networkx as nx

ALIASES_FILE = Path(__file__).with_name("tool_aliases.yaml")
ANSWER = "answer"
_ORDER_EDGES = {EdgeType.HARD_DEP, EdgeType.SOFT_DEP}
UNMATCHED = sys.maxsize  # the call position of an unmatched node: after every call
MAX_STATES = 1 << 12  # node sets one pass of the search may hold: all of any 12-node DAG's
Assignment = tuple[int, ...]  # call position of each gold node, in topological order
State = tuple[Assignment, int]  # a node set's earliest matching, and the nodes it leaves unmatchable


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
    import networkx as nx  # 0.1-0.4 s to import: only scoring a gold DAG needs it, not `tool_success`

    graph = nx.DiGraph()
    graph.add_nodes_from(node.id for node in dag.nodes)
    graph.add_edges_from((e.source, e.target) for e in dag.edges if e.type in types)
    return graph


def topological_order(dag: GoldDag) -> list[str]:
    """Node ids in the order matching walks them: HARD_DEP and SOFT_DEP respected, ties in gold order."""
    import networkx as nx

    position = {node.id: i for i, node in enumerate(dag.nodes)}
    try:
        return list(nx.lexicographical_topological_sort(_graph(dag, _ORDER_EDGES), key=position.__getitem__))
    except nx.NetworkXUnfeasible as error:
        raise ValueError("gold DAG has a cycle in its HARD_DEP/SOFT_DEP edges") from error


def _longest_hard_path(dag: GoldDag, among: set[str]) -> list[str]:
    import networkx as nx

    hard = _graph(dag, {EdgeType.HARD_DEP}).subgraph(among)
    return nx.dag_longest_path(hard, topo_order=[i for i in topological_order(dag) if i in among])


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
    coverage: float | None  # share of the required non-answer gold steps done (None: the gold has none)


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
    """Gold node id -> position of the call that did it: the matching of the module docstring."""
    problem = _problem(dag, groups)
    calls = [(position, tool) for position, tool, success in steps if success and tool in problem.by_tool]
    largest = _largest_node_sets(problem, calls)
    candidates = _sweep(problem, calls, ordered=True, size=largest[0].bit_count())
    if not candidates:  # every largest matching breaks a HARD_DEP order: SS will be 0
        candidates = {mask: _earliest_calls(problem, mask, calls) for mask in largest}
    best = min(
        candidates.values(),
        key=lambda assignment: (-_quality(dag, groups, steps, problem.matched(assignment)), assignment),
    )
    return problem.matched(best)


@dataclass(frozen=True)
class _Problem:
    """The gold nodes as bits (bit i = node i in topological order) and what constrains them."""

    order: list[str]
    by_tool: dict[str, list[int]]  # canonical tool -> its nodes
    tool_bits: list[int]  # the nodes of each tool of by_tool, as bits
    predecessors: list[int]  # per node: its HARD_DEP predecessors, as bits
    groups: list[tuple[int, int]]  # per ALT group: (its matchable members as bits, min_required)
    grouped: int  # the members of all ALT groups, as bits
    twin: dict[bool, list[int]]  # keeping order? -> per node: the alike node before it, as a bit (0: none)

    def matched(self, assignment: Assignment) -> dict[str, int]:
        pairs = [(self.order[node], position) for node, position in enumerate(assignment) if position != UNMATCHED]
        return dict(sorted(pairs, key=lambda pair: pair[1]))


def _bits(nodes: Iterable[int]) -> int:
    return sum(1 << node for node in set(nodes))


def _problem(dag: GoldDag, groups: list[AltGroup]) -> _Problem:
    order = topological_order(dag)
    index = {node_id: i for i, node_id in enumerate(order)}
    by_id = {node.id: node for node in dag.nodes}
    gold = [by_id[node_id] for node_id in order]
    by_tool: dict[str, list[int]] = {}
    for i, node in enumerate(gold):
        if node.tool is not None:  # a node of no known tool is never matched
            by_tool.setdefault(node.tool, []).append(i)
    matchable = _bits(i for nodes in by_tool.values() for i in nodes)
    hard = {(index[e.source], index[e.target]) for e in dag.edges if e.type is EdgeType.HARD_DEP}
    successors = [_bits(t for s, t in hard if s == i) for i in range(len(order))]
    predecessors = [_bits(s for s, t in hard if t == i) for i in range(len(order))]
    group_bits = [(_bits(index[node_id] for node_id in group.node_ids), group.min_required) for group in groups]
    # Nodes alike in all that the scores see (and, keeping order, in their HARD_DEP neighbours) are
    # interchangeable: some best matching gives them their calls in topological order.
    scored = [
        (node.tool, node.required, node.critical, tuple(g for g in group_bits if g[0] >> i & 1))
        for i, node in enumerate(gold)
    ]
    placed = [(*kind, successors[i], predecessors[i]) for i, kind in enumerate(scored)]
    return _Problem(
        order=order,
        by_tool=by_tool,
        tool_bits=[_bits(nodes) for nodes in by_tool.values()],
        predecessors=predecessors,
        groups=[(members & matchable, min_required) for members, min_required in group_bits],
        grouped=_bits(i for i in range(len(order)) for members, _ in group_bits if members >> i & 1),
        twin={False: _twins(scored), True: _twins(placed)},
    )


def _twins(kinds: list[tuple[Any, ...]]) -> list[int]:
    """Per node: the last node before it of the same kind, as a bit (0 when none)."""
    last: dict[tuple[Any, ...], int] = {}
    twins = []
    for node, kind in enumerate(kinds):
        twins.append(1 << last[kind] if kind in last else 0)
        last[kind] = node
    return twins


def _largest_node_sets(problem: _Problem, calls: list[tuple[int, str]]) -> list[int]:
    """The largest node sets (as bits) that some matching covers, order aside."""
    # Order aside, the sets a tool's calls can cover depend only on how many calls there are:
    # one stand-in call per node they can serve finds them all, whatever the number of calls.
    count = Counter(tool for _, tool in calls)
    stand_ins = [(0, tool) for tool, nodes in problem.by_tool.items() for _ in range(min(len(nodes), count[tool]))]
    sizes = range(len(stand_ins), -1, -1)  # size 0 always has the empty matching
    return next(found for size in sizes if (found := list(_sweep(problem, stand_ins, ordered=False, size=size))))


def _earliest_calls(problem: _Problem, mask: int, calls: list[tuple[int, str]]) -> Assignment:
    """The earliest matching of a node set, order aside: each tool's nodes take its first calls in turn."""
    assignment = [UNMATCHED] * len(problem.order)
    for tool, nodes in problem.by_tool.items():
        positions = iter([position for position, called in calls if called == tool])
        for node in nodes:
            if mask >> node & 1:
                assignment[node] = next(positions)
    return tuple(assignment)


def _sweep(problem: _Problem, calls: list[tuple[int, str]], ordered: bool, size: int) -> dict[int, Assignment]:
    """The node sets (as bits) of `size` nodes that valid matchings of the calls cover, each with its
    earliest matching; `ordered`: only matchings that break no HARD_DEP order.

    One pass over the calls holds every node set reachable so far that can still grow to `size`,
    with the earliest matching reaching it and the nodes it leaves unmatchable in order (those
    with a matched HARD_DEP successor): what later calls can do depends on nothing else."""
    states: dict[int, State] = {0: ((UNMATCHED,) * len(problem.order), 0)}
    tools = list(problem.by_tool)
    for (position, tool), left in zip(calls, _calls_left(problem, calls), strict=True):
        created = _advance(problem, states, position, tool, ordered)
        tight = left[tools.index(tool)] < len(problem.by_tool[tool])  # else only new sets' bounds changed
        for mask in list(states) if tight else created:
            if _reach(problem, mask, states[mask][1], left) < size:
                del states[mask]
        if len(states) > MAX_STATES:
            raise ValueError(
                f"gold DAG of {len(problem.order)} nodes: exact tool matching would hold more than "
                f"{MAX_STATES} node sets; refusing to approximate TOS"
            )
    return {mask: assignment for mask, (assignment, _) in states.items() if mask.bit_count() == size}


def _advance(problem: _Problem, states: dict[int, State], position: int, tool: str, ordered: bool) -> list[int]:
    """Give the call at `position` to each node each held matching can give it to; the new node sets."""
    twin = problem.twin[ordered]
    created = []
    for mask, (assignment, dead) in list(states.items()):  # a snapshot: one call matches one node
        for node in problem.by_tool[tool]:
            if (
                (mask | dead) >> node & 1
                or mask & twin[node] != twin[node]
                or (problem.groups and _group_full(problem, mask, node))
            ):
                continue
            taken = mask | 1 << node
            placed = (*assignment[:node], position, *assignment[node + 1 :])
            if taken not in states:
                created.append(taken)
            elif placed >= states[taken][0]:
                continue
            states[taken] = (placed, dead | problem.predecessors[node] if ordered else 0)
    return created


def _group_full(problem: _Problem, mask: int, node: int) -> bool:
    """Whether `node` is in an ALT group that already has min_required members matched."""
    return any(members >> node & 1 and (mask & members).bit_count() >= cap for members, cap in problem.groups)


def _calls_left(problem: _Problem, calls: list[tuple[int, str]]) -> list[tuple[int, ...]]:
    """Per call: how many calls of each tool of `problem.by_tool` come after it."""
    left = Counter(tool for _, tool in calls)
    after = []
    for _, tool in calls:
        left[tool] -= 1
        after.append(tuple(left[t] for t in problem.by_tool))
    return after


def _reach(problem: _Problem, mask: int, dead: int, left: tuple[int, ...]) -> int:
    """At most how many nodes a matching covering `mask` covers with `left` more calls of each tool:
    no more nodes of a tool than its calls, and no more of an ALT group than min_required."""
    free = ~(mask | dead)
    per_tool = sum(min((bits & free).bit_count(), n) for bits, n in zip(problem.tool_bits, left, strict=True))
    if not problem.groups:
        return mask.bit_count() + per_tool
    outside = ~problem.grouped & free
    split = sum(min((bits & outside).bit_count(), n) for bits, n in zip(problem.tool_bits, left, strict=True))
    split += sum(
        min(max(0, cap - (mask & members).bit_count()), (members & free).bit_count()) for members, cap in problem.groups
    )
    return mask.bit_count() + min(per_tool, split)


def _quality(
    dag: GoldDag, groups: list[AltGroup], steps: list[tuple[int, str, bool]], matched: dict[str, int]
) -> float:
    """GC + TF of a matching, rounded so that equal sums tie exactly."""
    true_positives, counted, items = _f1_counts(dag, groups, matched, steps)
    gc = _coverage(dag, set(matched) | _credited(groups, matched))
    return round(gc + _ratio(2 * true_positives, counted + items), 12)


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


@versioned("2")  # 2: semantic operators aliased (tool_aliases.yaml); coverage beside TOS
@reports("tos", "tq", "gc")
def tool_dag_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores:
    """Scorer `tool_dag`: TOS and its parts against the task's gold DAG (nothing without one)."""
    return dict(score_dag(task, trace))


@versioned("2")  # 2: SR 0 without tool calls, as tool_dag gives
@reports("sr")
def tool_success_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores:
    """Scorer `tool_success`: SR, the share of tool calls that succeeded (0 without calls, as `tool_dag`)."""
    return {"sr": success_rate([(call.tool, call.success) for call in trace.tool_calls])}

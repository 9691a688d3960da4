"""RAG systems (kind "rag"): naive FAISS retrieval, GraphRAG's community retrieval and HippoRAG's personalized
PageRank, each with one planning step for its decisions and our SQL tool for structured data.

    get_schema_info ─► plan (LLM, structured output) ─► retrieval + execute_sql ─► answer (LLM, `answer` tool)
    EXECUTE            DECISION                          EXECUTE                   GENERATE

- `rag_naive`: the plan names up to three search queries; each is a call of the task's `search_documents`
  tool (FAISS top-k over MiniLM embeddings of the document chunks, tools/documents.py, or FDABench's
  frozen vector-search results), traced by the tool environment under that canonical name. When the task's
  databases hold unstructured text (DAB's review texts: tools/text_columns.py), which no task tool searches,
  each query is also a `search_text_columns` step over this system's own FAISS index of those passages.
- `rag_graph`: the plan names search queries; each is a `graph_search` step over the corpus' community
  summaries (systems/rag_graph.py: entity graph, Louvain communities, summaries, MiniLM cosine).
- `rag_hippo`: the plan names the question's entities; one `ppr_search` step ranks passages by
  personalized PageRank over the entity graph seeded with them (systems/rag_graph.py).

The corpus of the graph systems is the whole of systems/rag_index.py's `task_corpus`: documents, frozen
search results and the databases' text columns.

The plan also holds up to three queries in the argument schema of the task's own query tool
(`execute_sql`, or DAB's `query_db`), each run with that tool; the schema is read first with the task's
schema tool (`get_schema_info`, or `list_db` per database) so the planner can write them. The answer
call reads the question, the schema, the retrieved passages and the query results, and calls `answer`.
Retrieval steps the system carries out itself are traced with `ctx.tool_step`; evaluators/tool_aliases.yaml
maps `search_text_columns`, `graph_search` and `ppr_search` onto `search_documents` for TOS.

Indexes (the entity graph, communities, summaries) are built in `prepare`, before any task's clock, once
per corpus, model and settings, cached on disk and metered on an indexing trace of their own
(systems/rag_index.py); a task only reads them. Budgets: a model call the budget refuses raises
BudgetExceeded and the task ends with the budget's status.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from ..core import (
    Answer,
    BudgetExceeded,
    Message,
    ModelError,
    RunContext,
    System,
    Task,
    ToolSettings,
    ToolSpec,
    prompt_hash,
)
from ..core.system import SystemSetup
from ..core.tool import ToolError, to_json
from ..workflows.planning import ANSWER_REFUSED, answer_from_results
from .rag_graph import (
    EXTRACT_SYSTEM,
    HIPPO_DAMPING,
    SUMMARY_SYSTEM,
    SYNONYM_COSINE,
    Community,
    CommunityIndex,
    HippoIndex,
    build_communities,
    community_settings,
    entity_graph,
    graph_settings,
    parse_json,
    to_networkx,
)
from .rag_index import Corpus, Indexer, Passage, index_key, task_corpus, text_column_rule
from .semantic_operators import FETCH_TOOLS, describe_data

RAG_VERSION = "1"
PLAN_SYSTEM = """You are the planner of a retrieval-augmented data analyst. Before anything runs, decide what to \
retrieve from the company documents and which read-only SQL queries to run over the database whose schema follows \
the question; their results are then given to you to answer. {retrieval} Write at most 3 SQL queries with exactly the \
quoted table and column names of the schema (none if the documents alone answer). Do not answer yet."""
QUERIES_NOTE = "Give 1 to 3 search queries for the document search: definitions, thresholds and rules the question \
needs."
COMMUNITIES_NOTE = "Give 1 to 3 search queries; each retrieves the summaries of the closest communities of the \
documents' knowledge graph with their passages."
ENTITIES_NOTE = "Name the question's entities (1 to 6: the programs, metrics, policies, products, regions and periods \
it mentions, as it writes them); passages are ranked by personalized PageRank over the documents' knowledge graph \
seeded with them."
ANSWER_SYSTEM = """You are a data analyst. The passages retrieved from the company documents and the results of \
your SQL queries follow the question. Answer from them; do not guess numbers they do not show. Call the `answer` \
tool."""

SEARCH_TOOL, TEXT_SEARCH = "search_documents", "search_text_columns"
MAX_QUERIES, MAX_SQL, MAX_ENTITIES = 3, 3, 6
TOP_COMMUNITIES = 2


class RagSystem(System):
    """The shared pipeline (module docstring); a subclass says how it retrieves and what it indexes."""

    kind = "rag"
    retrieval_note: ClassVar[str] = QUERIES_NOTE
    plan_field: ClassVar[str] = "queries"  # what the plan names for retrieval
    index_prompts: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        # Per run, shared by its tasks: the loaded index of each (corpus, model), or why it failed.
        self._indexes: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._tools = ToolSettings()
        self.unprepared_builds: list[dict[str, Any]] = []  # indexes built on first use, outside `prepare`
        self._partial: dict[tuple[str, str], str] = {}  # (corpus, model) -> which indexing calls failed

    def describe(self) -> dict[str, Any]:
        prompts = (PLAN_SYSTEM, self.retrieval_note, ANSWER_SYSTEM, ANSWER_REFUSED, *self.index_prompts)
        described = {**super().describe(), "prompt_version": RAG_VERSION, "prompt_hash": prompt_hash(*prompts)}
        settings = {"max_queries": MAX_QUERIES, "max_sql": MAX_SQL, "text_columns": text_column_rule()}
        return {**described, "settings": {**settings, **self.index_settings()}}

    def index_settings(self) -> dict[str, Any]:
        """The index's settings for the manifest (its prompts are in the prompt hash)."""
        return {}

    # ------------------------------------------------------------ one task

    def run(self, task: Task, ctx: RunContext) -> Answer:
        try:
            return self._run(task, ctx)
        except BudgetExceeded as limit:
            return Answer(status=limit.status, error=str(limit))

    def _run(self, task: Task, ctx: RunContext) -> Answer:
        offered = {spec.name: spec for spec in ctx.tool_specs()}
        sql = next((offered[name] for name in FETCH_TOOLS if name in offered), None)
        schema = describe_data(ctx) if sql else ""
        results = [Message(role="user", content=f"Database schema:\n{schema}")] if schema else []
        retrieve = self.can_retrieve(task, set(offered))
        plan = self._plan(ctx, results, retrieve, sql)
        if retrieve:
            limit = MAX_ENTITIES if self.plan_field == "entities" else MAX_QUERIES
            items = [str(item) for item in plan.get(self.plan_field, [])][:limit]
            steps = len(ctx.model.recorder.trace.tool_calls)
            results += self.retrieve(task, ctx, items)
            if not any(step.success for step in ctx.model.recorder.trace.tool_calls[steps:]):
                why = f"no {self.plan_field} in the plan" if items == [] else "every retrieval step failed"
                ctx.warn("no_retrieval", why if plan else "the plan could not be read")
        else:  # a RAG system compared on a task it cannot retrieve for: its main step never happened
            ctx.warn("no_retrieval", "the task has no documents or text this system retrieves from")
        for statement in plan.get("sql", [])[:MAX_SQL] if sql else []:
            ctx.check_budget()  # with the budget spent no call could read the result
            results.append(self._tool(ctx, sql.name, statement if isinstance(statement, dict) else {}))
        return self._answer(ctx, results)

    def _plan(self, ctx: RunContext, results: list[Message], retrieve: bool, sql: ToolSpec | None) -> dict[str, Any]:
        schema = self.plan_schema(retrieve, sql)
        if not schema["properties"]:
            return {}
        note = self.retrieval_note if retrieve else "There are no documents to search."
        messages = [
            Message(role="system", content=PLAN_SYSTEM.format(retrieval=note)),
            Message(role="user", content=ctx.task_prompt(answer_format=False)),
            *results,
        ]
        return parse_json(ctx.generate(messages, response_schema=schema).message.content)

    def plan_schema(self, retrieve: bool, sql: ToolSpec | None) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        if retrieve:
            limit = MAX_ENTITIES if self.plan_field == "entities" else MAX_QUERIES
            item = {"type": "string", "minLength": 1, "maxLength": 200}
            properties[self.plan_field] = {"type": "array", "items": item, "minItems": 1, "maxItems": limit}
        if sql is not None:
            properties["sql"] = {"type": "array", "items": sql.parameters, "maxItems": MAX_SQL}
        return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}

    def _tool(self, ctx: RunContext, name: str, arguments: dict[str, Any]) -> Message:
        result = ctx.call_tool(name, arguments)
        status = "ok" if result.success else "failed"
        return Message(role="user", content=f"Result of {name} {to_json(arguments)} [{status}]:\n{result.content}")

    def _answer(self, ctx: RunContext, results: list[Message]) -> Answer:
        return answer_from_results(ctx, results, ANSWER_SYSTEM)

    # ------------------------------------------------------------ what a subclass provides

    def can_retrieve(self, task: Task, offered: set[str]) -> bool:
        """Whether the plan names retrieval for this task (its documents, or text the system indexes)."""
        return self.corpus(task) is not None

    def retrieve(self, task: Task, ctx: RunContext, items: list[str]) -> list[Message]:
        """Traced retrieval steps for the plan's queries or entities; one result message each."""
        raise NotImplementedError

    def build_index(self, indexer: Indexer) -> Any:
        """Build or read this system's index over `indexer.corpus` (model calls through `indexer`)."""
        return None

    def corpus(self, task: Task) -> Corpus | None:
        """The task's corpus, or None when it has none or it cannot be read (the task's own tools say why)."""
        try:
            return task_corpus(task, self._tools)
        except (ToolError, OSError):
            return None

    # ------------------------------------------------------------ indexes, shared by the tasks of a run

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        """Build or read the index of every corpus of `tasks` for this model before any task's clock."""
        self._tools = setup.tools
        reports: list[dict[str, Any]] = []
        seen: set[str] = set()
        for task in tasks:
            corpus = None if task.unavailable or not self.indexes() else self.corpus(task)
            if corpus is not None and corpus.digest not in seen and self.builds_for(corpus):
                seen.add(corpus.digest)
                reports += self._load(corpus, setup)
        return reports

    def indexes(self) -> bool:
        return type(self).build_index is not RagSystem.build_index

    def builds_for(self, corpus: Corpus) -> bool:
        """Whether this corpus needs an index of this system's own."""
        return True

    def _load(self, corpus: Corpus, setup: SystemSetup) -> list[dict[str, Any]]:
        key = (corpus.digest, setup.model.alias)
        with self._lock:
            if key in self._indexes:
                return []
        indexer = Indexer(setup, self.name, corpus)
        try:
            index: Any = self.build_index(indexer)
        except Exception as failure:  # kept: each task over this corpus reports it
            index = failure
        reports = indexer.finish()
        failed = [r for r in reports if "failed_calls" in r]
        partial = [f"{r['failed_calls']} of {r['model_calls']} {r['index']} calls" for r in failed]
        if partial and not isinstance(index, Exception):
            with self._lock:
                self._partial[key] = f"the index was built with failed indexing calls: {', '.join(partial)}"
        if isinstance(index, Exception):
            error = f"{type(index).__name__}: {index}"
            reports.append({"corpus": corpus.name, "model": setup.model.alias, "error": error})
        with self._lock:
            self._indexes.setdefault(key, index)
        return reports

    def index_for(self, task: Task, ctx: RunContext) -> Any:
        """The task's index: prepared by the runner, else built now on a trace of its own (not the task's)."""
        corpus = task_corpus(task, self._tools)
        if corpus is None:
            return None
        key = (corpus.digest, ctx.model.alias)
        with self._lock:
            found = self._indexes.get(key)
        if found is None:
            built = self._load(corpus, SystemSetup(ctx.model.config, self._tools))
            with self._lock:
                self.unprepared_builds += built
                found = self._indexes[key]
        if isinstance(found, ModelError):
            raise ModelError(f"the index could not be built: {found}")
        if isinstance(found, Exception):
            raise RuntimeError(f"the index could not be built: {type(found).__name__}: {found}")
        if key in self._partial:  # usable, yet short of what some failed calls would have added: said per record
            ctx.warn("partial_failure", self._partial[key])
        return found


def index_settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in {"prompt", "summary_prompt", "schema"}}


def passages_text(lines: list[str], limit: int) -> str:
    text = "\n\n".join(lines) or "nothing found"
    return text if len(text) <= limit else text[:limit] + f"\n…[truncated: {len(text)} characters]"


class NaiveRag(RagSystem):
    """Naive RAG: FAISS top-k over document chunks (MiniLM) for the planned queries, SQL, then the answer."""

    name = "rag_naive"

    def can_retrieve(self, task: Task, offered: set[str]) -> bool:
        return SEARCH_TOOL in offered or self._searches_text_columns(task)

    def builds_for(self, corpus: Corpus) -> bool:
        return bool(corpus.database_passages())

    def _searches_text_columns(self, task: Task) -> bool:
        corpus = self.corpus(task)
        return corpus is not None and self.builds_for(corpus)

    def build_index(self, indexer: Indexer) -> TextColumnIndex | None:
        passages = indexer.corpus.database_passages()
        return TextColumnIndex(passages, indexer.vectors(passages)) if passages else None

    def retrieve(self, task: Task, ctx: RunContext, items: list[str]) -> list[Message]:
        offered = {spec.name for spec in ctx.tool_specs()}
        own = self._searches_text_columns(task)
        messages = []
        for query in items:
            if SEARCH_TOOL in offered:
                messages.append(self._tool(ctx, SEARCH_TOOL, {"query": query}))
            if own:
                messages.append(self._search_text_columns(task, ctx, query))
        return messages

    def _search_text_columns(self, task: Task, ctx: RunContext, query: str) -> Message:
        index: TextColumnIndex = self.index_for(task, ctx)
        arguments = {"query": query, "top_k": self._tools.search_top_k}
        with ctx.tool_step(TEXT_SEARCH, arguments) as step:
            found = index.search(query, self._tools.search_top_k)
            lines = [f"{p.render()}\n(cosine {score:.3f})" for p, score in found]
            step.content = passages_text(lines, ctx.budgets.tool_result_max_chars)
        return Message(role="user", content=f"Result of {TEXT_SEARCH} {to_json(arguments)}:\n{step.content}")


class TextColumnIndex:
    """rag_naive's FAISS index of the passages of the databases' text columns."""

    def __init__(self, passages: list[Passage], vectors: Any) -> None:
        self.passages, self.vectors = passages, vectors

    def search(self, query: str, top_k: int) -> list[tuple[Passage, float]]:
        return [(self.passages[i], score) for i, score in self.vectors.positions(query, top_k)]


class GraphRag(RagSystem):
    """GraphRAG: entity graph, Louvain communities and their summaries; retrieval over community summaries."""

    name = "rag_graph"
    retrieval_note = COMMUNITIES_NOTE
    index_prompts = (EXTRACT_SYSTEM, SUMMARY_SYSTEM)

    def index_settings(self) -> dict[str, Any]:
        return {"top_communities": TOP_COMMUNITIES, **index_settings(community_settings())}

    def build_index(self, indexer: Indexer) -> CommunityIndex:
        model, corpus = indexer.setup.model, indexer.corpus
        graph = entity_graph(indexer)
        key = index_key(corpus, model, "communities", community_settings(), indexer.setup.generation)
        found = indexer.obtain("communities", key, lambda ix: build_communities(ix, graph))
        return CommunityIndex(corpus, to_networkx(graph), [Community(**c) for c in found["communities"]])

    def retrieve(self, task: Task, ctx: RunContext, items: list[str]) -> list[Message]:
        index: CommunityIndex = self.index_for(task, ctx)
        limit = ctx.budgets.tool_result_max_chars
        messages = []
        for query in items:
            arguments = {"query": query, "top_communities": TOP_COMMUNITIES, "top_k": self._tools.search_top_k}
            with ctx.tool_step("graph_search", arguments) as step:
                communities, passages = index.search(query, TOP_COMMUNITIES, self._tools.search_top_k)
                lines = [f"Community: {c.title}\n{c.summary}" for c in communities]
                step.content = passages_text(lines + [p.render() for p in passages], limit)
            header = f"Result of graph_search {to_json(arguments)}:"
            messages.append(Message(role="user", content=f"{header}\n{step.content}"))
        return messages


class HippoRag(RagSystem):
    """HippoRAG: personalized PageRank over the entity graph, seeded by the question's entities."""

    name = "rag_hippo"
    retrieval_note = ENTITIES_NOTE
    plan_field = "entities"
    index_prompts = (EXTRACT_SYSTEM,)

    def index_settings(self) -> dict[str, Any]:
        return {"synonym_cosine": SYNONYM_COSINE, "damping": HIPPO_DAMPING, **index_settings(graph_settings())}

    def build_index(self, indexer: Indexer) -> HippoIndex:
        return HippoIndex(indexer.corpus, to_networkx(entity_graph(indexer)))

    def retrieve(self, task: Task, ctx: RunContext, items: list[str]) -> list[Message]:
        index: HippoIndex = self.index_for(task, ctx)
        arguments = {"entities": items, "top_k": self._tools.search_top_k}
        with ctx.tool_step("ppr_search", arguments) as step:
            seeds = index.seeds(items)
            if not seeds:  # PageRank without a seed ranks nothing of the question's: no retrieval
                why = "no entity of the plan is in the graph" if items else "the plan named no entities"
                ctx.warn("no_retrieval", why)
            ranked = index.rank(seeds, self._tools.search_top_k)
            matched = ", ".join(index.graph.nodes[node]["name"] for node in seeds) or "none"
            lines = [f"{p.render()}\n(PageRank {score:.4f})" for p, score in ranked]
            limit = ctx.budgets.tool_result_max_chars
            step.content = passages_text([f"Graph entities matched: {matched}", *lines], limit)
        return [Message(role="user", content=f"Result of ppr_search {to_json(arguments)}:\n{step.content}")]

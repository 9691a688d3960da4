"""Where a framework adapter's harness time per model call goes: ours, the framework's, the HTTP client's.

    .venv/bin/python tests/perf/profile_adapters.py run SYSTEM [--repeats 40]     # what py-spy records
    /tmp/tools/bin/py-spy record -r 500 -f raw -o OUT.txt -- .venv/bin/python tests/perf/profile_adapters.py run SYSTEM
    .venv/bin/python tests/perf/profile_adapters.py split OUT.txt [RATE CALLS]                 # the attribution

`run` plays measure_adapters.py's scripted sequence on one bundled task through the real runner, as many
times as asked. `split` reads py-spy's raw (collapsed) stacks and keeps only the samples inside a unit's
framework thread (`FrameworkSystem.run`) or the gateway's request handler (`providers/endpoint.py`
`do_POST`), minus the ones inside the scripted model or a tool call (what measure_adapters.py counts as
busy). Each kept sample goes to the owner of its innermost non-stdlib frame: ours (data_agent_compare's
files), the HTTP client stack (httpx, httpcore, h11, anyio, openai), pydantic, or the framework's packages
(langchain*, langgraph*, autogen*, llama_index*, ...). Stdlib leaves go to the frame that called the stdlib
(e.g. json.dumps called from our gateway is ours), except in the gateway's socket handling (the HTTP server).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(system: str, repeats: int) -> None:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from measure_adapters import respond

    from data_agent_compare.core import QuestionType

    from helpers import load_tasks, run_task, scripted_provider

    task = next(t for t in load_tasks("bundled") if t.question_type == QuestionType.SINGLE_CHOICE)
    calls = 0
    with scripted_provider() as install, tempfile.TemporaryDirectory() as folder:
        model = install(respond)
        for repeat in range(repeats):
            record, _trace, _ = run_task(Path(folder) / f"{system}-{repeat}", model, task, system)
            assert record["status"] == "completed", record["error"]
            calls += record["model_calls"]
    print(f"{system}: {repeats} runs, {calls} model calls")


FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
HTTP = ("httpx", "httpcore", "h11", "anyio", "openai", "sniffio", "certifi")
FRAMEWORK = ("langchain", "langgraph", "langsmith", "autogen", "llama_index", "tiktoken", "tenacity", "nest_asyncio")


def owner(file: str) -> str | None:
    """Who a frame's file belongs to; None for the standard library. py-spy shortens a path to what follows
    its sys.path entry: `main/engine/runner.py` (this checkout), `httpx/_client.py`, `json/encoder.py`."""
    top = file.split("/", 1)[0].removesuffix(".py")
    if file.startswith("<") or top in sys.stdlib_module_names:
        return None
    if top in ("main", "wt-base", "pp-base", "data_agent_compare", "helpers", "measure_adapters", "profile_adapters"):
        return "ours"
    if top.startswith(HTTP) or top in ("h2", "hpack", "hyperframe", "jiter"):
        return "http client (httpx/openai)"
    if top.startswith("pydantic") or top in ("_internal", "typing_extensions", "typing_inspection"):
        return "pydantic"
    if top.startswith(FRAMEWORK):
        return "framework"
    return "framework"  # py-spy also shortens some packages' paths to a subpackage (langgraph's pregel/)


def split(path: Path) -> None:
    totals: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [FRAME.match(f) for f in stack.split(";")]
        frames = [(m["func"], m["file"]) for m in frames if m]
        files = [f"{func} {file}" for func, file in frames]
        text = ";".join(files)
        totals["all"] += n
        in_unit = re.search(r"(^|;)(\w+\.)?run \S*systems/bridge\.py", text)
        in_gateway = "do_POST" in text and "providers/endpoint.py" in text
        if not (in_unit or in_gateway):
            totals["outside a unit"] += n
            continue
        if "_find_and_load" in text:
            totals["imports inside a unit (first run)"] += n
            continue
        if "providers/scripted.py" in text:
            totals["scripted model (busy)"] += n
            continue
        if re.search(r"(^|;)(\w+\.)?call_tool \S*core/context\.py", text):
            totals["tool call (busy)"] += n
            continue
        who, at = None, 0
        for at in range(len(frames) - 1, -1, -1):
            who = owner(frames[at][1])
            if who is not None:
                break
        if who is not None and any(f[1].startswith("asyncio/") for f in frames[at + 1 :]):
            who = "asyncio event loop (stdlib)"  # an async framework's loop, run by asyncio.run in our drive()
        if in_gateway and frames and owner(frames[-1][1]) is None and who == "ours":
            leaf_mod = frames[-1][1]
            if "socket" in leaf_mod or "socketserver" in leaf_mod or "http/server" in leaf_mod:
                who = "gateway http server (stdlib)"
        kept[who or "stdlib"] += n
        if who == "ours":
            func, file = next((f for f in reversed(frames) if owner(f[1]) == "ours"), ("?", "?"))
            ours[f"{func} ({file})"] += n
    whole = sum(kept.values())
    print(f"samples: {dict(totals)}; harness samples kept: {whole}")
    if len(sys.argv) > 3:  # rate (Hz) and model calls: the kept samples as ms per call
        rate, calls = float(sys.argv[3]), int(sys.argv[4])
        print(f"  = {whole / rate / calls * 1e3:.1f} ms per model call under the profiler ({calls} calls)")
    for who, n in kept.most_common():
        print(f"  {who:32s} {n:6d}  {100 * n / whole:5.1f}%")
    print("  ours, by innermost function:")
    for name, n in ours.most_common(12):
        print(f"    {name:60s} {n:5d}  {100 * n / whole:5.1f}%")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 40
        run(sys.argv[2], repeats)
    else:
        split(Path(sys.argv[2]))

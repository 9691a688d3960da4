#!/usr/bin/env bash
# Set up the suite in .venv: find Python 3.11, install the package, build llama.cpp for this CPU.
# Safe to run again: it reinstalls only when pyproject.toml changed. The slow parts run side by side
# (llama.cpp's build, the Python packages with uv, Debian's packages), and every 20 s a line says how
# each is doing; their full output goes to .venv/setup/*.log (docs/first-hour.md: what takes how long).
set -euo pipefail
cd "$(dirname "$0")"

setup_started=$SECONDS
say() { printf 'setup: [%dm%02ds] %s\n' $(((SECONDS - setup_started) / 60)) $(((SECONDS - setup_started) % 60)) "$*"; }

find_python() {
  local candidate
  for candidate in python3.11 "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/3.11"*/bin/python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

# ---- background jobs: each writes its own log; wait_for prints a progress line every 20 s (SETUP_TICK_S) and
# says a job's end when it ends, whichever job it waits for
TICK_S=${SETUP_TICK_S:-20}
declare -A job_pid=() job_log=()
trap 'for pid in "${job_pid[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT
start_job() {  # NAME LOG COMMAND...
  local name=$1 log=$2; shift 2
  "$@" >"$log" 2>&1 &
  job_pid[$name]=$!; job_log[$name]=$log
  say "started: $name (log: $log)"
}
job_progress() {  # what a running job has done so far, read from its log or its output
  case $1 in
    llama.cpp) { grep -o '^ *\[[0-9]*/[0-9]*\]' "${job_log[$1]}" | tr -d ' ' || echo "[configuring]"; } | tail -n 1 | sed 's/^/compiled /' ;;
    "python packages") echo "$(du -sm .venv 2>/dev/null | cut -f1) MB in .venv" ;;
    "palimpzest environment") echo "$(du -sm "${XDG_CACHE_HOME:-$HOME/.cache}/data-agent-compare/environments" 2>/dev/null | cut -f1) MB of environments" ;;
    *) grep -v '^\s*$' "${job_log[$1]}" | tail -n 1 | cut -c1-80 ;;
  esac
}
finish_job() {  # NAME: the ended job's "done" line, or its failure with the end of its log (and stop)
  local name=$1
  if ! wait "${job_pid[$name]}"; then
    say "$name failed; the end of ${job_log[$name]}:" >&2
    tail -n 25 "${job_log[$name]}" >&2
    exit 1
  fi
  unset "job_pid[$name]"
  say "done: $name"
}
wait_for() {  # NAME: wait for the job, saying what every running job does every TICK_S s; stop on a failure
  local name=$1 ticks=0 other line ended
  [ -n "${job_pid[$name]:-}" ] || return 0  # it ended while another job was waited for: already said
  while kill -0 "${job_pid[$name]}" 2>/dev/null; do
    sleep 1
    ended=()
    for other in "${!job_pid[@]}"; do
      [ "$other" != "$name" ] && ! kill -0 "${job_pid[$other]}" 2>/dev/null && ended+=("$other")
    done
    for other in "${ended[@]}"; do finish_job "$other"; done  # its true end, not when it is waited for
    if (((ticks += 1) % TICK_S == 0)); then
      line=""
      for other in "${!job_pid[@]}"; do
        kill -0 "${job_pid[$other]}" 2>/dev/null && line+="${line:+; }$other: $(job_progress "$other" || true)"
      done
      say "running: $line"
    fi
  done
  finish_job "$name"
}
# A test reads the functions above without running the set-up (tests/app/test_setup_progress.py).
if [ "${SETUP_FUNCTIONS_ONLY:-0}" = 1 ]; then
  return 0 2>/dev/null || exit 0
fi

# ---- Debian packages, started first (they take longest to download): the PostgreSQL server
# (DataAgentBench's PostgreSQL databases are restored into a throw-away local server at run time),
# bubblewrap (the sandbox of model-written Python and of external agents), golang-go (the shipped Go agent) and chromium (the headless browser the report test
# opens report.html in; Playwright's own download does not work here).
packages=()
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  packages+=(postgresql)
fi
if ! command -v bwrap >/dev/null 2>&1; then
  packages+=(bubblewrap)
fi
if ! command -v chromium >/dev/null 2>&1; then
  packages+=(chromium)
fi
if ! command -v go >/dev/null 2>&1; then
  packages+=(golang-go)  # the shipped Go agent (go_mcp_agent) is built with it, once, in its sandbox
fi
apt_log=$(mktemp -t setup-apt.XXXXXX.log)
if [ ${#packages[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    start_job "debian packages" "$apt_log" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${packages[*]}"
  else
    for package in "${packages[@]}"; do
      case $package in
        postgresql) echo "setup: note: no PostgreSQL server found; DAB tasks with PostgreSQL need 'apt-get install postgresql' or --postgres-url" >&2 ;;
        bubblewrap) echo "setup: note: bubblewrap (bwrap) not found; execute_python refuses to run without it: 'apt-get install bubblewrap' (or pass --unsafe-python)" >&2 ;;
        chromium) echo "setup: note: chromium not found; the browser test of report.html skips without it: 'apt-get install chromium'" >&2 ;;
        golang-go) echo "setup: note: go not found; the shipped Go agent cannot be built: 'apt-get install golang-go'" >&2 ;;
      esac
    done
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python=$(find_python) || { echo "setup: Python 3.11 not found (tried python3.11, pyenv 3.11.*, python3)" >&2; exit 2; }
  say "creating .venv with $python"
  "$python" -m venv .venv
fi

# The CPU build of torch: a file on these machines' disk for Python 3.11 (pip's find-links); without it
# the resolver would pull a multi-GB CUDA build through sentence-transformers.
local_torch() {
  local folder
  for folder in ${PIP_FIND_LINKS:-} /opt/wheels; do
    ls "$folder"/torch-2.13.0+cpu-cp311-*.whl 2>/dev/null | head -n 1 && return 0
  done
  return 0
}

# The package's requirements without llama-cpp-python, which is built beside them.
requirements_but_llama() {
  .venv/bin/python - <<'PYTHON'
import re
import tomllib

with open("pyproject.toml", "rb") as file:
    project = tomllib.load(file)["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    if re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower().replace("_", "-") != "llama-cpp-python":
        print(requirement)
PYTHON
}

stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  mkdir -p .venv/setup
  pip=(.venv/bin/python -m pip --disable-pip-version-check)
  say "installing uv (the installer of the Python packages) into .venv"
  "${pip[@]}" install --quiet "uv==0.13.8" 2>&1 | grep -v "is ignored: it is neither" || true
  uv=(.venv/bin/uv pip install --python .venv/bin/python)
  export UV_LINK_MODE=copy  # the cache may lie on another file system: copy without a warning
  # llama.cpp's default native build crashes in decode on these CPUs: build it for a portable AVX2 target,
  # without the multimodal library (mtmd: a third of the build; the embedded model reads text only).
  # pip caches the wheel, so this runs once per machine.
  rm -rf .venv/setup/wheels
  start_job llama.cpp .venv/setup/llama-cpp.log env \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "${pip[@]}" wheel --no-deps -v "llama-cpp-python==0.3.36" -w .venv/setup/wheels
  requirements_but_llama >.venv/setup/requirements.txt
  torch=$(local_torch)
  [ -n "$torch" ] || say "note: no local CPU build of torch 2.13.0 found; the registry's (large) torch is installed"
  start_job "python packages" .venv/setup/python-packages.log "${uv[@]}" ${torch:+"$torch"} -r .venv/setup/requirements.txt
  wait_for "python packages"
  wait_for llama.cpp
  say "installing llama.cpp's wheel and the package itself (editable)"
  "${uv[@]}" --quiet ${torch:+"$torch"} .venv/setup/wheels/llama_cpp_python-0.3.36-*.whl -e ".[dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# Palimpzest in an environment of its own (palimpzest 0.9.0 pins numpy 2 and sentence-transformers 5; beside
# LangChain 1.x pip settles on 0.7.7, which breaks LlamaIndex), built by the suite's mechanism for systems in
# their own environments (systems/environments.py): once per machine into the environment cache, keyed by the
# hash of its requirements (systems/palimpzest_system.py: REQUIREMENTS, CPU torch from the local wheel folder).
# ~3 min and ~2.4 GB the first time, nothing after. SETUP_SKIP_PALIMPZEST=1 skips it (a run of `palimpzest`
# then builds it before its first task). The .venv-palimpzest an older setup.sh made here is superseded.
if [ "${SETUP_SKIP_PALIMPZEST:-0}" != 1 ]; then
  rm -rf .venv-palimpzest
  mkdir -p .venv/setup
  start_job "palimpzest environment" .venv/setup/palimpzest.log \
    .venv/bin/python -m data_agent_compare.systems.palimpzest_system --build-environment
fi
for name in "palimpzest environment" "debian packages"; do
  if [ -n "${job_pid[$name]:-}" ]; then
    wait_for "$name"
  fi
done
echo "setup: ready (.venv/bin/compare) after $((SECONDS - setup_started)) s"

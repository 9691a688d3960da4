#!/usr/bin/env bash
# Set up the suite in .venv: find Python 3.11, install the package, build llama.cpp for this CPU.
# Safe to run again: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")"

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

if [ ! -x .venv/bin/python ]; then
  python=$(find_python) || { echo "setup: Python 3.11 not found (tried python3.11, pyenv 3.11.*, python3)" >&2; exit 2; }
  echo "setup: creating .venv with $python"
  "$python" -m venv .venv
fi

stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  pip=(.venv/bin/python -m pip --quiet --disable-pip-version-check)
  "${pip[@]}" install --upgrade pip wheel setuptools
  # The CPU build of torch (a file on these machines' disk for Python 3.11); without it pip
  # would pull a multi-GB CUDA build through sentence-transformers.
  "${pip[@]}" install "torch==2.13.0"
  # llama.cpp's default native build crashes in decode on these CPUs (see ENVIRONMENT.md):
  # build it for a portable AVX2 target instead. pip caches the wheel, so this runs once.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" \
    "${pip[@]}" install "llama-cpp-python==0.3.36"
  "${pip[@]}" install -e ".[dev]"
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
  .venv/bin/python -m data_agent_compare.systems.palimpzest_system --build-environment
  rm -rf .venv-palimpzest
fi
# Debian packages: the PostgreSQL server (DataAgentBench's PostgreSQL databases are restored into a
# throw-away local server at run time), bubblewrap (the sandbox of model-written Python) and chromium
# (the headless browser the report test opens report.html in; Playwright's own download does not work here).
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
if [ ${#packages[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${packages[*]} (apt-get install)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
  else
    for package in "${packages[@]}"; do
      case $package in
        postgresql) echo "setup: note: no PostgreSQL server found; DAB tasks with PostgreSQL need 'apt-get install postgresql' or --postgres-url" >&2 ;;
        bubblewrap) echo "setup: note: bubblewrap (bwrap) not found; execute_python refuses to run without it: 'apt-get install bubblewrap' (or pass --unsafe-python)" >&2 ;;
        chromium) echo "setup: note: chromium not found; the browser test of report.html skips without it: 'apt-get install chromium'" >&2 ;;
      esac
    done
  fi
fi
echo "setup: ready (.venv/bin/compare)"

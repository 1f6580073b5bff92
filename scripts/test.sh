#!/usr/bin/env bash
# Set up .venv (with test tools), lint, and run the whole test suite, slow integration tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
CTXCOMP_EXTRAS=test,ray bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"

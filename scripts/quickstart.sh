#!/usr/bin/env bash
# Set up .venv and run the embedded offline experiment (full context vs BM25 vs MiniLM retrieval).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The run folder is ctxcomp's own default (runs/quickstart, or runs/quickstart-<reader> with --reader),
# unless CTXCOMP_QUICKSTART_OUT names one.
exec .venv/bin/ctxcomp quickstart ${CTXCOMP_QUICKSTART_OUT:+--out "$CTXCOMP_QUICKSTART_OUT"} "$@"

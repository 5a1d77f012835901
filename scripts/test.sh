#!/usr/bin/env bash
# The test command: set up .venv, then run the whole suite (unit + integration; gpu tests skip without a GPU)
# on two pytest-xdist workers.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
set +e
# Two workers, each taking whole test files (session fixtures are built once per worker, so
# tests/conftest.py keeps the three files that read the finished run on one worker; it also lists the
# longest files first, an order pytest-xdist keeps with --no-loadscope-reorder): most integration tests wait
# on child processes, servers and Ray start-ups, so two of them share two cores well (the suite's wall time:
# README). MAPPA_TEST_WORKERS=0 runs it in this process.
workers=${MAPPA_TEST_WORKERS:-2}
if [ "$workers" -gt 0 ]; then
  .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
else
  .venv/bin/python -m pytest "$@"
fi
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$status"

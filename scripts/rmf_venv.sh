#!/usr/bin/env bash
# Create .venv-rmf: a separate virtual environment with rmftool (the refined
# mean-field tool of Gast and Van Houdt; import name rmftool), used only by the
# optional test tests/test_meanfield_rmftool.py (through tests/rmf_worker.py) to
# check ctmc.meanfield's refined coefficients. ctmc never imports rmftool.
#
#   scripts/rmf_venv.sh            # creates ./.venv-rmf (idempotent)
#   scripts/rmf_venv.sh /some/dir  # or a venv at another path
#
# Then: .venv/bin/python -m pytest tests/test_meanfield_rmftool.py
#       (or set CTMC_RMFTOOL_PYTHON=/some/dir/bin/python)
#
# rmftool 0.5 declares no dependencies but imports numpy, scipy, sympy and
# matplotlib at import time, so they are installed here explicitly.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-rmf}"
PY="${PYTHON:-/usr/bin/python3}"
fail() { echo "rmf_venv.sh: $*" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV" || fail "could not create a venv at $VENV with $PY"
fi
if ! "$VENV/bin/python" -c "import rmftool.population_processes" 2>/dev/null; then
    "$VENV/bin/pip" install -q --upgrade pip || fail "pip upgrade failed in $VENV"
    "$VENV/bin/pip" install -q rmftool numpy scipy sympy matplotlib || fail "pip install rmftool failed in $VENV"
fi
"$VENV/bin/python" -c "import rmftool.population_processes" \
    || fail "rmftool is installed in $VENV but 'import rmftool.population_processes' fails (see above)"
"$VENV/bin/python" -c "from importlib.metadata import version; print('rmftool', version('rmftool'), 'in', '$VENV')"

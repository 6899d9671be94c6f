#!/usr/bin/env bash
# Create .venv-storm: a separate virtual environment with stormpy, used only by
# benchmarks/bench_gallery.py to run Storm side by side with ctmc on the same
# models (ctmc itself never imports stormpy). stormpy's wheels pin their own
# numpy, hence a venv of its own rather than an extra of ctmc-exact.
#
#   scripts/storm_venv.sh            # creates ./.venv-storm (about a minute)
#   scripts/storm_venv.sh /some/dir  # or a venv at another path
#
# Then: .venv/bin/python benchmarks/bench_gallery.py --storm .venv-storm/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-storm}"
PY="${PYTHON:-/usr/bin/python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q stormpy numpy
"$VENV/bin/python" -c "import stormpy; print('stormpy', stormpy.__version__, 'in', '$VENV')"

#!/usr/bin/env bash
# Set up ctmc in ./.venv on a fresh Debian machine.
#   bash scripts/bootstrap.sh          runtime only (numpy, scipy, ctmc)
#   bash scripts/bootstrap.sh --test   plus what the test suite and plots need
# The virtual environment is made from Debian's own Python 3 with
# --system-site-packages, so the Debian PETSc/SLEPc bindings (optional backend)
# are visible to it; numpy stays below 2 because those bindings are built
# against NumPy 1.x.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
if [ "${1:-}" = "--test" ]; then extras="[test,plot]"; fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need=()
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi

if [ ! -x .venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check "numpy<2" -e ".${extras}"

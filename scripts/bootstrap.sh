#!/usr/bin/env bash
# Set up ctmc in ./.venv on a fresh Debian machine.
#   bash scripts/bootstrap.sh          runtime only (numpy, scipy, tabulate, pyamg, ctmc)
#   bash scripts/bootstrap.sh --petsc  plus the PETSc/SLEPc backend over MPI (Debian packages)
#   bash scripts/bootstrap.sh --test   plus what the test suite and plots need (PETSc included,
#                                      so that its tests, some under mpirun -n 2, run too)
# The virtual environment is made from Debian's own Python 3 with
# --system-site-packages, so the Debian PETSc/SLEPc bindings (optional backend)
# are visible to it; numpy stays below 2 because those bindings are built
# against NumPy 1.x.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."

usage() { sed -n '3,6p' "$self" | sed 's/^# \{0,1\}//'; }

extras=""
petsc=0
for arg in "$@"; do
    case "$arg" in
        --test) extras="[test,plot]"; petsc=1 ;;
        --petsc) petsc=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bootstrap.sh: unknown argument '$arg'; expected:" >&2; usage >&2; exit 2 ;;
    esac
done

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || need+=(python3-venv)
# the compiled model builder (ctmc/_explore.c) needs a C compiler and the Python headers; without
# them the install still succeeds and numpy builds every model, several times slower
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -f "/usr/include/python3.$(/usr/bin/python3 -c 'import sys; print(sys.version_info[1])')/Python.h" ] \
    || need+=(python3-dev)
if [ "$petsc" = 1 ]; then
    # Debian's PETSc/SLEPc bindings and OpenMPI (about a minute; building PETSc
    # from PyPI sources takes most of an hour). Skipped when already installed.
    # libopenblas0-pthread: Debian's default BLAS under MUMPS is the reference one; with
    # OpenBLAS (picked by update-alternatives) JSQ K=2000's factorisation takes 5.5 s, not 15.6 s
    for pkg in python3-petsc4py-real python3-slepc4py-real openmpi-bin libopenblas0-pthread; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
    done
fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        SUDO=""
    elif command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        {
            echo "bootstrap.sh: these Debian packages are missing: ${need[*]}"
            echo "You are not root and sudo is not available. Ask an administrator to run, as root:"
            echo "    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${need[*]}"
            echo "then run this script again."
        } >&2
        exit 1
    fi
    # through `env`: sudo resets the environment, so a plain VAR=value prefix would be lost
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

if [ ! -x .venv/bin/python ]; then
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# This project was installed under the distribution name "ctmc" before it became
# "ctmc-exact" (the name ctmc on PyPI is another project): drop that old install of
# this checkout, whose leftover import hook would still provide a top-level `models`.
if .venv/bin/python -m pip show -f ctmc 2>/dev/null | grep -q "__editable__.ctmc-"; then
    .venv/bin/python -m pip uninstall -q -y ctmc
fi
.venv/bin/python -m pip install -q --disable-pip-version-check "numpy<2" -e ".${extras}"
if [ "$petsc" = 1 ] && ! .venv/bin/python -c "import petsc4py, slepc4py" 2>/dev/null; then
    # Debian's petsc4py.pth/slepc4py.pth look under /usr/lib/petsc and /usr/lib/slepc, links that only the
    # -dev packages' alternatives create: point the venv at the runtime packages' own folders instead
    site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ls -d /usr/lib/petscdir/*/*-real/lib/python3/dist-packages /usr/lib/slepcdir/*/*-real/lib/python3/dist-packages \
        2>/dev/null | sort -V > "$site/ctmc-debian-petsc.pth"
    .venv/bin/python -c "import petsc4py, slepc4py" \
        || { echo "bootstrap.sh: petsc4py/slepc4py still not importable from .venv" >&2; exit 1; }
fi

"""Find and initialise petsc4py and slepc4py (imported on first use only).

Search order for PETSc (SLEPc likewise with ``SLEPC_DIR``):

1. an importable ``petsc4py`` (a pip build against a site PETSc, or Debian's
   with ``PETSC_DIR`` set before Python started);
2. ``$PETSC_DIR/lib/python3/dist-packages`` when ``PETSC_DIR`` is set;
3. Debian's real-number build ``/usr/lib/petscdir/petsc*/*-real`` (the newest),
   which ``python3-petsc4py-real`` installs but only links as the default
   PETSc when the ``-dev`` packages are installed too.

PETSc is initialised with ``sys.argv``, so PETSc options on the command line
(``-ctmc_ksp_type bcgs``, ``-log_view``, ...) and in ``PETSC_OPTIONS`` reach
the options database.
"""
from __future__ import annotations

import glob
import os
import re
import sys

__all__ = ["INSTALL_HELP", "load_petsc", "load_slepc"]

INSTALL_HELP = (
    "the PETSc backend needs petsc4py (and slepc4py for the eigen and matrix-function solvers). "
    "On Debian/Ubuntu: `bash scripts/bootstrap.sh --petsc` (it runs `apt-get install "
    "python3-petsc4py-real python3-slepc4py-real openmpi-bin` and makes .venv with "
    "--system-site-packages and numpy<2). With a site PETSc (cluster): export PETSC_DIR and "
    "PETSC_ARCH (and SLEPC_DIR) for that build, then `pip install --no-build-isolation petsc4py "
    "slepc4py` with the versions matching it. See docs/petsc.rst.")

_STATE: dict = {}


def _debian_dir(root: str) -> str | None:
    """Newest real-number build under a Debian ``/usr/lib/{petsc,slepc}dir`` tree."""
    def version(path):
        return tuple(int(v) for v in re.findall(r"\d+", os.path.basename(os.path.dirname(path))))
    cands = [p for p in glob.glob(os.path.join(root, "*", "*-real"))
             if not re.match(r"(petsc|slepc)64", os.path.basename(os.path.dirname(p)))]
    return max(cands, key=version) if cands else None


def _add_path(env: str, root: str):
    base = os.environ.get(env) or _debian_dir(root)
    if base is None:
        return
    site = os.path.join(base, "lib", "python3", "dist-packages")
    if os.path.isdir(site) and site not in sys.path:
        sys.path.append(site)
        os.environ.setdefault(env, base)


def load_petsc():
    """Return the initialised ``petsc4py.PETSc`` module.

    Raises
    ------
    ImportError
        When petsc4py cannot be found (the message says how to install it).
    """
    if "PETSc" in _STATE:
        return _STATE["PETSc"]
    try:
        import petsc4py
    except ImportError:
        _add_path("PETSC_DIR", "/usr/lib/petscdir")
        try:
            import petsc4py
        except ImportError as exc:
            raise ImportError(INSTALL_HELP) from exc
    try:
        petsc4py.init(sys.argv)
        from petsc4py import PETSc
    except ImportError as exc:  # e.g. built against an incompatible NumPy
        raise ImportError(f"petsc4py is installed but does not load ({exc}); {INSTALL_HELP}") from exc
    _STATE["PETSc"] = PETSc
    return PETSc


def load_slepc():
    """Return the initialised ``slepc4py.SLEPc`` module (PETSc first)."""
    if "SLEPc" in _STATE:
        return _STATE["SLEPc"]
    load_petsc()
    try:
        import slepc4py
    except ImportError:
        _add_path("SLEPC_DIR", "/usr/lib/slepcdir")
        try:
            import slepc4py
        except ImportError as exc:
            raise ImportError("slepc4py not found: the PETSc backend's method='eps' (stationary) and "
                              f"method='expm' (transient) need it; {INSTALL_HELP}") from exc
    slepc4py.init(sys.argv)
    from slepc4py import SLEPc
    _STATE["SLEPc"] = SLEPc
    return SLEPc

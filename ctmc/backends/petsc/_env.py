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

On more than one MPI process, an exception that ends one process's program
aborts the whole job (``MPI_Abort`` on ``COMM_WORLD``, from a
:data:`sys.excepthook` installed by :func:`load_petsc` after the traceback is
printed): otherwise the other processes wait for ever in their next collective
(and in ``MPI_Finalize``). ``CTMC_MPI_ABORT=0`` in the environment leaves
:data:`sys.excepthook` alone. The abort goes through mpi4py when the program
has imported it, else through the MPI library PETSc is linked with (ctypes).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import re
import sys

__all__ = ["INSTALL_HELP", "load_petsc", "load_slepc", "mpi_abort", "abort_job", "ABORT_ENV"]

#: environment variable: ``0`` keeps the abort-on-exception hook out (:func:`load_petsc`)
ABORT_ENV = "CTMC_MPI_ABORT"

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
    if _aborts(PETSc.COMM_WORLD):
        _abort_on_exception(PETSc.COMM_WORLD)
    return PETSc


def _aborts(comm) -> bool:
    """Whether a process that stops early aborts the job: several processes, and not ``CTMC_MPI_ABORT=0``."""
    return comm.getSize() > 1 and os.environ.get(ABORT_ENV, "1") != "0"


def abort_job(code: int) -> None:
    """Abort the MPI job with ``code`` (when non-zero) if PETSc runs on several processes.

    For a program that ends one process with an error status (the ``ctmc``
    command's exit statuses 1 and 2): the other processes would otherwise
    wait for ever in their next collective. Does nothing for ``code == 0``,
    before PETSc is loaded, on one process or with ``CTMC_MPI_ABORT=0``.
    """
    PETSc = _STATE.get("PETSc")
    if code and PETSc is not None and _aborts(PETSc.COMM_WORLD):
        sys.stdout.flush()
        sys.stderr.flush()
        mpi_abort(PETSc.COMM_WORLD, code)


def _libmpi():
    """The MPI library this process has loaded (PETSc's), else the system's ``libmpi``."""
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "libmpi.so" in line}
    except OSError:
        paths = set()
    for path in sorted(paths):
        if os.path.basename(path).startswith("libmpi.so"):
            return ctypes.CDLL(path)
    name = ctypes.util.find_library("mpi")
    return ctypes.CDLL(name) if name else None


def mpi_abort(comm, code: int = 1):
    """``MPI_Abort(comm, code)`` for a petsc4py communicator: every process of the job ends.

    Through mpi4py when the program has imported it; else through the MPI
    library's C function (ctypes), the communicator converted from its
    Fortran handle (``MPI_Comm_f2c``, or the handle itself where the C and
    Fortran handles are the same integer, as in MPICH); ``os._exit(code)``
    if neither can be reached (``mpirun`` then ends the job, one process
    having left without ``MPI_Finalize``).
    """
    if "mpi4py.MPI" in sys.modules:
        comm.tompi4py().Abort(code)
    lib = _libmpi()
    if lib is not None and hasattr(lib, "MPI_Abort"):
        handle = comm.fortran
        if hasattr(lib, "MPI_Comm_f2c"):
            lib.MPI_Comm_f2c.restype = ctypes.c_void_p
            handle = lib.MPI_Comm_f2c(ctypes.c_int(handle))
        lib.MPI_Abort(ctypes.c_void_p(handle), ctypes.c_int(code))
    os._exit(code)


def _abort_on_exception(comm):
    """Chain a :data:`sys.excepthook` that prints the traceback, then aborts the job."""
    previous = sys.excepthook

    def abort_on_exception(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
            print(f"ctmc: process {comm.getRank()} of {comm.getSize()} ended by an exception: aborting the "
                  f"MPI job ({ABORT_ENV}=0 to keep the processes)", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
        finally:
            mpi_abort(comm, 1)
    sys.excepthook = abort_on_exception


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

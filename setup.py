"""Package list of ctmc-exact (all other metadata is in pyproject.toml).

pyproject.toml maps the package ``ctmc.models`` to the folder ``models/``
(``package-dir``); setuptools' ``find`` cannot put the prefix ``ctmc.models.``
on the packages it finds in that folder, so both lists are found here, afresh
at every build: a new subpackage of ``ctmc/`` or ``models/`` needs no edit.
No top-level ``models`` package is installed.

The two compiled pieces are optional: without a C compiler and the Python
headers the install still succeeds. ``ctmc._explore`` is the compiled model
builder (:mod:`ctmc._compiled`; without it numpy builds every model);
``ctmc._kernels`` the vector kernels of the Krylov solvers (:mod:`ctmc._relax`,
:mod:`ctmc.krylov`; without it their numpy/pyamg fallbacks run), built with
OpenMP where the compiler has it and without it (one thread) where not.
"""
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, LinkError

OPENMP = ["-fopenmp"]


class BuildExt(build_ext):
    """Build an extension with OpenMP, and again without it if the compiler or linker refuses the flag."""

    def build_extension(self, ext):
        if not set(OPENMP) & set(ext.extra_compile_args):
            return super().build_extension(ext)
        try:
            return super().build_extension(ext)
        except (CCompilerError, CompileError, LinkError):
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a not in OPENMP]
            ext.extra_link_args = [a for a in ext.extra_link_args if a not in OPENMP]
            return super().build_extension(ext)


HERE = Path(__file__).resolve().parent
core = find_packages(where=str(HERE), include=["ctmc", "ctmc.*"])
families = ["ctmc.models"] + [f"ctmc.models.{p}" for p in find_packages(where=str(HERE / "models"))]
explore = Extension("ctmc._explore", sources=["ctmc/_explore.c"], optional=True,
                    depends=[f"ctmc/_explore_{part}.h" for part in ("vm", "store", "events", "sim")],
                    extra_compile_args=["-O2", "-std=c99"])
kernels = Extension("ctmc._kernels", sources=["ctmc/_kernels.c"], optional=True,
                    depends=sorted(str(p.relative_to(HERE)) for p in (HERE / "ctmc").glob("_kernels_*.h")),
                    extra_compile_args=["-O3", "-std=c99", "-ffp-contract=off"] + OPENMP, extra_link_args=OPENMP)
setup(packages=core + families, ext_modules=[explore, kernels], cmdclass={"build_ext": BuildExt})

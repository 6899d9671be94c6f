"""Package list of ctmc-exact (all other metadata is in pyproject.toml).

pyproject.toml maps the package ``ctmc.models`` to the folder ``models/``
(``package-dir``); setuptools' ``find`` cannot put the prefix ``ctmc.models.``
on the packages it finds in that folder, so both lists are found here, afresh
at every build: a new subpackage of ``ctmc/`` or ``models/`` needs no edit.
No top-level ``models`` package is installed.

The one compiled piece, ``ctmc._explore`` (the compiled model builder,
:mod:`ctmc._compiled`), is optional: without a C compiler and the Python
headers the install still succeeds and every model is built by numpy.
"""
from pathlib import Path

from setuptools import Extension, find_packages, setup

HERE = Path(__file__).resolve().parent
core = find_packages(where=str(HERE), include=["ctmc", "ctmc.*"])
families = ["ctmc.models"] + [f"ctmc.models.{p}" for p in find_packages(where=str(HERE / "models"))]
explore = Extension("ctmc._explore", sources=["ctmc/_explore.c"], optional=True,
                    depends=[f"ctmc/_explore_{part}.h" for part in ("vm", "store", "events")],
                    extra_compile_args=["-O2", "-std=c99"])
setup(packages=core + families, ext_modules=[explore])

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(params=["scipy", pytest.param("petsc", marks=pytest.mark.petsc)])
def backend(request):
    """Each backend by name; "petsc" is skipped, with the install help, where petsc4py is missing."""
    if request.param == "petsc":
        from ctmc.backends import petsc
        if not petsc.available():
            pytest.skip(f"petsc4py not installed: {petsc.INSTALL_HELP}")
    return request.param

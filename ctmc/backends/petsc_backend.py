"""Kept so existing imports work; the backend is :mod:`ctmc.backends.petsc`."""
from __future__ import annotations

from .petsc import (BACKEND_OPTIONS, INSTALL_HELP, PREFIX, DistributedChain, available,
                    check_backend_options, load_petsc, load_slepc, operator, slepc_available)

__all__ = ["DistributedChain", "operator", "BACKEND_OPTIONS", "check_backend_options", "PREFIX",
           "INSTALL_HELP", "load_petsc", "load_slepc", "available", "slepc_available"]

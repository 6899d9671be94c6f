r"""Supermarket model: exact finite-n power-of-d systems versus mean-field limits.

The model
---------
:math:`n` single-server queues, each served at rate 1 (exponential). Jobs
arrive in a Poisson stream of rate :math:`\lambda n`; each arrival samples
:math:`d` queues uniformly (with replacement, the default, or without) and
joins a shortest sampled one (ties broken uniformly). With a per-queue
capacity :math:`B`, an arrival whose chosen queue already holds :math:`B` jobs
is lost. :math:`d = 1` is random routing (independent M/M/1 queues),
:math:`d = n` without replacement is join-the-shortest-queue.

Layout
------
:mod:`.occupancy`
    The occupancy (lumped) chain: state enumeration, colex ranking, generator,
    sampling probabilities.
:mod:`.crosscheck`
    The unlumped per-queue chain for tiny ``n``, which checks the lumping.
:mod:`.model`
    :class:`Supermarket`: the exact finite-n system, its measures and the
    automatic choice of the capacity.
:mod:`.meanfield`
    The mean-field limit and its refined :math:`1/n` correction, computed by
    :mod:`ctmc.meanfield` from the supermarket declared as a population model
    (:func:`population_model`).
:mod:`.params`
    The parameter checks the other modules share.
:mod:`.plot`
    The error plot of the study (:func:`plot_errors`).
:mod:`ctmc.models.supermarket.cli`
    The ``ctmc supermarket`` command and the ``ctmc report`` study.

References
----------
M. Mitzenmacher, "The power of two choices in randomized load balancing",
IEEE TPDS 12(10), 2001. N. D. Vvedenskaya, R. L. Dobrushin, F. I. Karpelevich,
Problems of Information Transmission 32(1), 1996. N. Gast, B. Van Houdt,
"A refined mean field approximation", POMACS 1(2), 2017. N. Gast,
L. Bortolussi, M. Tribastone, "Size expansions of mean field approximation:
transient and steady-state analysis", Performance Evaluation 2018.

Examples
--------
>>> from ctmc.models.supermarket import Supermarket, mean_field_fixed_point
>>> s = Supermarket(4, 2, 0.9, capacity=10)
>>> s.chain().n_states                       # C(14, 10)
1001
>>> round(s.mean_jobs_per_server(), 4) > round(float(mean_field_fixed_point(2, 0.9)[1:].sum()), 4)
True
"""
from __future__ import annotations

from .occupancy import (join_probabilities, n_occupancy_states, occupancy_generator, occupancy_model,
                        occupancy_rank, occupancy_states, sample_all_at_least)
from .crosscheck import lump_per_queue, per_queue_model
from .model import MAX_STATES, Supermarket, Truncation, TruncationWarning
from .meanfield import (RefinedMeanField, mean_field_derivatives, mean_field_drift, mean_field_fixed_point,
                        mean_field_ode, population_model, refined_correction, refined_mean_field)
from .plot import plot_errors
from .cli import add_arguments, report, run, study

__all__ = [
    "Supermarket", "Truncation", "TruncationWarning", "n_occupancy_states",
    "occupancy_states", "occupancy_rank",
    "occupancy_generator", "occupancy_model", "join_probabilities", "sample_all_at_least", "per_queue_model",
    "lump_per_queue", "mean_field_drift", "mean_field_fixed_point", "mean_field_ode",
    "mean_field_derivatives", "refined_correction", "refined_mean_field", "RefinedMeanField",
    "population_model",
    "add_arguments", "run", "report",
]

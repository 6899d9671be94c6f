r"""M^X|G|1|r queue with hysteretic overload control (SIP-server load control).

The ``ctmc hysteresis`` command (:func:`add_arguments`, :func:`run`) and the
hysteresis part of ``ctmc report`` (:func:`report`): main measures of the
hysteretic overload-control queue. The first line above is the command's
help text.
"""
from __future__ import annotations

import argparse

import ctmc
from ctmc.report import format_table

__all__ = ["add_arguments", "run", "report", "build_queue"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ctmc hysteresis``."""
    parser.add_argument("--L", type=int, default=10, help="overload abatement threshold (default 10)")
    parser.add_argument("--H", type=int, default=20, help="overload onset threshold (default 20)")
    parser.add_argument("--R", type=int, default=30, help="discard threshold (default 30)")
    parser.add_argument("--capacity", type=int, default=None, help="capacity r (default R)")
    parser.add_argument("--lam", type=float, default=1.2, help="batch rate in normal mode")
    parser.add_argument("--lam-overload", type=float, default=0.6, help="batch rate in overload")
    parser.add_argument("--mu", type=float, default=1.0, help="service rate (exponential service)")
    service = parser.add_mutually_exclusive_group()
    service.add_argument("--erlang", type=int, default=None, metavar="K",
                         help="Erlang-K service with mean 1/mu instead of exponential")
    service.add_argument("--deterministic", action="store_true",
                         help="deterministic service 1/mu (embedded-chain route)")
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument("--batch-geometric", type=float, default=None, metavar="P",
                       help="geometric batch sizes with success probability P (mean 1/P)")
    batch.add_argument("--batch-fixed", type=int, default=None, metavar="K", help="batches of K customers")
    parser.add_argument("--policy", default="instant", choices=["instant", "departure-epoch"])
    parser.add_argument("--acceptance", default="partial", choices=["partial", "whole"])
    parser.add_argument("--route", default="auto", choices=["auto", "ctmc", "embedded"])
    parser.add_argument("--bound", action="store_true",
                        help="route ctmc: also prove a bound on the 1-norm error of the law (ctmc's "
                             "error_bound; costs about ten times the law)")
    # invalid values are reported by this parser (one line, exit status 2)
    parser.set_defaults(hysteresis_parser=parser)


def build_queue(args):
    """A :class:`~models.hysteresis.HysteresisQueue` from parsed arguments."""
    from .queue import HysteresisQueue
    from .service import deterministic, erlang, fixed_batch, geometric_batch

    if args.mu <= 0:
        raise ValueError(f"mu: must be finite and > 0, got {args.mu!r}")
    service = None
    if args.deterministic:
        service = deterministic(1.0 / args.mu)
    elif args.erlang is not None:
        service = erlang(args.erlang, mean=1.0 / args.mu)
    batch = None
    if args.batch_geometric is not None:
        batch = geometric_batch(args.batch_geometric)
    elif args.batch_fixed is not None:
        batch = fixed_batch(args.batch_fixed)
    return HysteresisQueue(args.L, args.H, args.R, args.lam, args.lam_overload, mu=args.mu,
                           capacity=args.capacity, batch=batch, service=service, policy=args.policy,
                           acceptance=args.acceptance)


def _cell(v) -> str:
    """A summary value as printed: floats to 10 digits, a status by its value ("success")."""
    if isinstance(v, float):
        return f"{v:.10g}"
    return v.value if isinstance(v, ctmc.Status) else str(v)


def _format(q, summary) -> str:
    rows = [[k, _cell(v)] for k, v in summary.items()]
    return format_table(rows, ["measure", "value"], title=repr(q))


def run(args) -> str:
    """Solve the queue described by ``args`` and return the printable measures.

    A ValueError from the model (a parameter out of range) goes to the
    parser's ``error``: one line naming the parameter, exit status 2.
    """
    try:
        q = build_queue(args)
        bound = getattr(args, "bound", False)
        if bound and (args.route == "embedded" or not q.is_phase_type):
            raise ValueError("bound: the proven error bound is of route 'ctmc' (phase-type service)")
        res = q.stationary_ctmc(bound=True) if bound else None    # the bounded law serves the measures
        summary = q.summary(args.route)
        if res is not None:
            summary.update({"status": res.status, "error bound": res.error_bound})
        return _format(q, summary)
    except ValueError as exc:
        parser = getattr(args, "hysteresis_parser", None)
        if parser is None:
            raise
        parser.error(str(exc))


def report(plots_dir=None) -> str:
    """Study for ``ctmc report``: both routes on one instance, and a plot if asked."""
    from .queue import HysteresisQueue
    from .service import erlang, geometric_batch

    out = ["hysteresis: M^X|G|1|r with hysteretic overload control"]
    q = HysteresisQueue(10, 20, 30, lam=1.1, lam_overload=0.5, service=erlang(4, 1.0),
                        batch=geometric_batch(0.7))
    a, b = q.stationary("ctmc"), q.stationary("embedded")
    out.append(_format(q, q.summary("ctmc")))
    width = max(a.p.shape[1], b.p.shape[1])
    out.append(f"  route (a) vs (b): max |p_a - p_b| = {abs(a.levels(width) - b.levels(width)).max():.2e}")
    if plots_dir:
        from ctmc.report import new_figure, save_figure
        fig = new_figure()
        ax = fig.subplots()
        ax.bar(range(a.p.shape[1]), a.p[0], label="normal")
        ax.bar(range(a.p.shape[1]), a.p[1], bottom=a.p[0], label="overload")
        ax.bar(range(a.p.shape[1]), a.p[2], bottom=a.p[0] + a.p[1], label="discard")
        ax.set_xlabel("customers in system")
        ax.set_ylabel("probability")
        ax.legend()
        save_figure(fig, plots_dir, "hysteresis_law.png", dpi=100, say=out.append)
    return "\n".join(out)

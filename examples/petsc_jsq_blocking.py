"""Blocking probability of a large two-queue JSQ system, solved with PETSc over MPI.

Arrivals at total rate rho join the shorter of two queues of capacity K
(:class:`ctmc.models.jsq.JSQ2`); an arrival finding both queues full is lost, so by
PASTA the blocking probability is the stationary probability of the state
(K, K). The chain has (K+1)(K+2)/2 states. Each MPI process explores the
state codes, assembles only its own block of rows of the generator and PETSc
solves the pinned stationary system (MUMPS by default, ``--method gmres`` for
the largest sizes). The answer is checked against the closed form of
:func:`ctmc.models.jsq.blocking_probability`.

Run (as root, mpirun also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)::

    mpirun -n 2 .venv/bin/python examples/petsc_jsq_blocking.py              # K = 500, 125 751 states
    mpirun -n 2 .venv/bin/python examples/petsc_jsq_blocking.py --K 4500 --rho 1.2 --method gmres
                                                                             # 10.1 million states

Without petsc4py it prints how to install it and exits.
"""
import argparse
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--K", type=int, default=500, help="capacity of each queue (default 500)")
    p.add_argument("--rho", type=float, default=0.9, help="total arrival rate (default 0.9)")
    p.add_argument("--mu2", type=float, default=0.5, help="service rate of the longer queue (default 0.5)")
    p.add_argument("--method", default="lu", choices=["lu", "gmres", "bicgstab", "eig"])
    args = p.parse_args(argv)

    from ctmc.backends.petsc_backend import INSTALL_HELP, DistributedChain, available
    if not available():
        print(f"This example needs the PETSc backend: {INSTALL_HELP}")
        return
    from ctmc.models.jsq import JSQ2, blocking_probability

    q = JSQ2(args.K, args.rho, args.mu2)
    t0 = time.perf_counter()
    dc = DistributedChain.from_model(q.model(), [{"s": 0, "l": y} for y in range(args.K + 1)])
    built = time.perf_counter() - t0
    # pin the most probable state: (0, 0) when rho < 1, the full state (K, K) when overloaded
    pin = dc.index(s=args.K, l=args.K) if args.rho > 1 else dc.index(s=0, l=0)
    res = dc.stationary(args.method, pin=pin, check=False, backend_options={"gather": "none"})
    full = dc.index(s=args.K, l=args.K)
    mine = float(res.pi[full - dc.start]) if dc.start <= full < dc.stop else -1.0
    blocking = dc.allmax(mine)  # the owner of (K, K) shares its value
    mem = dc.memory()["peak_mib_per_rank"]
    if dc.rank == 0:
        exact = blocking_probability(args.K, args.rho, args.mu2)
        print(f"JSQ2 K={args.K}, rho={args.rho}, mu2={args.mu2}: {dc.n_states} states on {dc.size} "
              f"process(es), method {res.method}")
        print(f"  blocking probability  {blocking:.12e}   (closed form {exact:.12e}, "
              f"relative error {abs(blocking / exact - 1):.1e})")
        print(f"  status {res.status.value}, ||pi Q||_1 = {res.residual:.1e}, balance error "
              f"{res.balance_error:.1e}, {res.iterations} iterations")
        print(f"  build {built:.1f} s, solve {res.wall_time:.1f} s, peak memory per process (MiB): "
              + ", ".join(f"{m:.0f}" for m in mem))


if __name__ == "__main__":
    main()

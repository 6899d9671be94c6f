"""Model builders for ctmc, written only against ctmc's public API.

Each family (two-queue join-the-shortest-queue, hysteretic load control,
supermarket / power-of-d) lives in its own package, one module per job (closed
forms, the chain, solution routes, command line), with its literature checks
beside it.
"""

"""Model builders for ctmc, written only against ctmc's public API.

Each family (two-queue join-the-shortest-queue, hysteretic load control,
supermarket / power-of-d) lives in its own module with its closed forms and
literature checks beside it.
"""

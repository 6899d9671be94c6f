"""``python -m ctmc``: the ``ctmc`` command (:func:`ctmc.cli.main`)."""
import sys

from .cli import main

if __name__ == "__main__":      # not on import (the doctest walk imports every module)
    sys.exit(main())

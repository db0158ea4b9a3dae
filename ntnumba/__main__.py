"""``python -m ntnumba``: the same as the ``ntnumba`` command (see :mod:`ntnumba.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

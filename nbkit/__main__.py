"""``python -m nbkit``: the same command line as the ``nbkit`` script (see :mod:`nbkit.command`)."""

import sys

from nbkit.command import main

__all__: list[str] = []


if __name__ == "__main__":
    sys.exit(main())

"""``python -m asgteach ...`` is the same as the ``asgteach`` command (see cli.py)."""

import sys

from .cli import main

sys.exit(main())

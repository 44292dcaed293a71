"""``python -m protab.cli``: the ``protab`` command."""

import sys

from protab.cli import main

sys.exit(main())

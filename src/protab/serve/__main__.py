"""``python -m protab.serve --db FILE --config serve.toml [--host 127.0.0.1] [--port 8000]``."""

from __future__ import annotations

import sys

from protab.serve.commands import main

if __name__ == "__main__":
    sys.exit(main())

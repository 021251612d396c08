"""``python -m cassette_hook``: the command line (:mod:`cassette_hook.cli.main`)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m evalsite.cli`: the `evalsite` command."""

import sys

from .main import main

sys.exit(main())

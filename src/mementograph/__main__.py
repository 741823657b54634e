"""`python -m mementograph`: the same as the `mementograph` command."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())

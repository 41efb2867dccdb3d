"""`python -m grader DIR` from tools/, as `python tools/grade.py DIR`."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())

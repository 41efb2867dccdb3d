"""``python -m attention_from_scratch doctor``: see :mod:`attention_from_scratch.doctor`."""

import sys

from .doctor import main

sys.exit(main())

"""``python -m harel.cli``."""

import sys

from harel.cli import main

sys.exit(main())

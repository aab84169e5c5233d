"""Lets ``pytest bench/`` import the benchmark modules as the scripts do (``from common import
...``): the bench folder goes first on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

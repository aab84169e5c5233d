"""Example machines shipped with harel (``order.stm`` is the demo's and the tests' machine)."""

from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent
"""The directory holding the example ``*.stm`` files."""

ORDER_STM = EXAMPLES_DIR / "order.stm"
"""An order: a 15-minute confirmation timer, a payment/packing fork, a 2-hour delivery timer."""

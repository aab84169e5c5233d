"""Run every benchmark script in this folder and print what each reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    """Run each ``bench/*.py`` (except this file) with the current interpreter."""
    here = Path(__file__).resolve().parent
    failures = 0
    for script in sorted(here.glob("*.py")):
        if script.name == "run.py":
            continue
        print(f"== {script.name}", flush=True)
        failures += subprocess.run([sys.executable, str(script)], check=False).returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

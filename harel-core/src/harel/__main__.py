"""``python -m harel``: the same as the ``harel`` command."""

from harel.cli import main

raise SystemExit(main())

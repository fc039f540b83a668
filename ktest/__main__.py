"""``python -m ktest``: the same as the ``ktest`` console script."""

from ktest.cli.main import main

raise SystemExit(main())

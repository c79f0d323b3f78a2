"""``python -m benchmarks``."""

from .cli import main

raise SystemExit(main())

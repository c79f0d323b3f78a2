"""``python -m flask_social_oauth2.local_idp``."""

from .cli import main

raise SystemExit(main())

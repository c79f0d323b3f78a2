"""The pytest plugin ``social_oauth2``: the :func:`social_idp` fixture.

Installing flask-social-oauth2 registers this module (entry point ``pytest11``), so every
test run of every project that installs the package loads it. It therefore imports pytest
and nothing else: the fixture imports :mod:`flask_social_oauth2.testing` and the local
identity provider (Authlib) when a test first uses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .local_idp import LocalIdentityProvider

__all__ = ["social_idp"]


@pytest.fixture
def social_idp() -> Iterator[LocalIdentityProvider]:
    """A started local identity provider (a real OAuth 2.0 / OpenID Connect server on
    loopback), stopped after the test.

    Point a provider at it with :func:`~flask_social_oauth2.testing.use_local_idp` or
    :func:`~flask_social_oauth2.testing.local_idp_block`, then run sign-ins with
    :func:`~flask_social_oauth2.testing.sign_in`. Its knobs (``deny_next``,
    ``fail_next_token``, ``auto_approve``) and records (``token_requests``, ...) are there
    for the test.
    """
    from .testing import local_idp, require_local_idp

    missing = None
    try:
        require_local_idp()
    except ImportError as error:
        missing = str(error)
    if missing is not None:  # outside the except: the failure shows no chained traceback
        pytest.fail(missing, pytrace=False)
    with local_idp() as provider:
        yield provider

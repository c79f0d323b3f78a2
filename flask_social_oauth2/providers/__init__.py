"""Built-in providers: one small module each, registered by name in :data:`BUILTIN_PROVIDERS`.

A configuration block whose name is a key of :data:`BUILTIN_PROVIDERS` gets that class; any
other name gets the generic :class:`~flask_social_oauth2.provider.OAuth2Provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..provider import OAuth2Provider

BUILTIN_PROVIDERS: Mapping[str, type[OAuth2Provider]] = MappingProxyType({})

"""The Sphinx site builds as `tox -e docs` builds it: warnings are errors, every reference is
checked. Here too, so that a docstring or a page that would break the site fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_sphinx_site_builds_without_a_warning(tmp_path: Path) -> None:
    options = ["-W", "--keep-going", "-n", "-E", "-q", "-b", "html"]
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", *options, str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf-8")
    for name in ("SocialOAuth2", "OAuth2Settings", "SocialProfile", "AuthenticationError"):
        assert f'id="flask_social_oauth2.{name}"' in api or f"errors.{name}" in api
    index = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert 'href="configuration.html"' in index
    assert "Quick start" in index

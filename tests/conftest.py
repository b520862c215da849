"""Shared fixtures. The ``sweep`` marker is registered in pyproject.toml."""

from __future__ import annotations

import warnings

import pytest

warnings.filterwarnings("ignore", message="transformer_engine module not found")
warnings.filterwarnings("ignore", message="The 'symbolic values' cache option is highly experimental")

import metatrace  # noqa: E402


@pytest.fixture
def enabled():
    """metatrace enabled for one test, thunder restored afterwards."""
    with metatrace.enable():
        yield
    assert not metatrace.is_enabled()

"""Fixtures of the protocol tests."""

from tests.protocols.openai_support import openai_for

__all__ = ["openai_for"]

"""Chat models: the `ChatModel` protocol and the providers (imported on first use)."""

from plait.models.base import ChatModel

__all__ = ["ChatModel"]

"""What the Agent Protocol's routes share: the error responses their documentation lists."""

from __future__ import annotations

import functools

from plait.server.bodies import error_responses

__all__ = ["errors"]

#: What each error status means on the Agent Protocol's routes.
_MEANINGS = {
    401: "No valid API key (`x-api-key` or `Authorization: Bearer`).",
    404: "Unknown assistant, thread, run or item (also one of another user).",
    409: "The object exists, the thread is busy, or it cannot be changed so.",
    422: "The body does not match the schema, or names an unknown option.",
    501: "A part of the Agent Protocol plait does not serve yet.",
}

errors = functools.partial(error_responses, _MEANINGS)
"""Return a route's error responses for the given statuses."""

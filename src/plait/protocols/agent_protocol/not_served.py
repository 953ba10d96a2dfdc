"""What the Agent Protocol's `501`s say: plait answers `501`, naming what it does not
serve yet (`interrupt_before`/`interrupt_after`, `after_seconds` on a streamed run,
`threads.create` with `supersteps`), so a client learns at once what is missing."""

from __future__ import annotations

__all__ = ["NOT_YET"]

#: What a `501` of the Agent Protocol says after the name of what is not served.
NOT_YET = "is not served by plait yet"

"""`Closing`: `async with` support for anything closed by `await obj.close()`."""

from __future__ import annotations

from typing import Self

__all__ = ["Closing"]


class Closing:
    """`async with obj:` returns `obj` and closes it when the block ends, however it ends."""

    async def close(self) -> None:
        """Release what is held (nothing here)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

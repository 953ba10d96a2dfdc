"""The dev page that `create_app(..., ui=True)` serves at `/`.

One HTML page, its scripts and one style sheet (in `plait/server/static/`), with no CDN or
other network asset: the page works offline and talks only to the API of the server that
serves it. The page itself holds no data, so it needs no API key; everything it shows comes
from the API with the key typed into the page (kept in the browser's localStorage and sent as
`Authorization: Bearer <key>`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import FastAPI
from fastapi.responses import Response

__all__ = ["mount"]

#: route -> (file in `static/`, media type)
FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/trace.js": ("trace.js", "text/javascript; charset=utf-8"),
    "/ui/history.js": ("history.js", "text/javascript; charset=utf-8"),
    "/ui/sidebar.js": ("sidebar.js", "text/javascript; charset=utf-8"),
    "/ui/topology.js": ("topology.js", "text/javascript; charset=utf-8"),
    "/ui/eval.js": ("eval.js", "text/javascript; charset=utf-8"),
    "/ui/approvals.js": ("approvals.js", "text/javascript; charset=utf-8"),
    "/ui/style.css": ("style.css", "text/css; charset=utf-8"),
}

#: The page may load only its own script and style and talk only to its own server.
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def read_static(name: str) -> bytes:
    """Return the bytes of one of the page's files."""
    return resources.files("plait.server").joinpath("static", name).read_bytes()


def _serve(body: bytes, media_type: str) -> Callable[[], Awaitable[Response]]:
    async def serve() -> Response:
        return Response(body, media_type=media_type, headers=HEADERS)

    return serve


def mount(app: FastAPI) -> None:
    """Add the dev page's routes to `app`: the page at `/`, its files under `/ui/`.

    These routes need no API key (the page holds no data) and are left out of the OpenAPI
    schema.
    """
    for path, (name, media_type) in FILES.items():
        app.add_api_route(
            path,
            _serve(read_static(name), media_type),
            methods=["GET"],
            include_in_schema=False,
            name=f"dev page: {name}",
        )

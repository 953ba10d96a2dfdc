"""The dev page that `create_app(..., ui=True)` serves at `/`.

One HTML page, its scripts and one style sheet (in `plait/server/static/`), with no CDN or
other network asset: the page works offline and talks only to the API of the server that
serves it. The page itself holds no data, so it needs no API key; everything it shows comes
from the API with the key typed into the page (kept in the browser's localStorage and sent as
`Authorization: Bearer <key>`). `/ui/instance` names the app the page talks to, so that
the page notices a reload of the app (`plait dev`) by itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

__all__ = ["mount"]

#: The media type of each kind of file in `static/`.
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def _files() -> dict[str, tuple[str, str]]:
    """Return route -> (file in `static/`, media type): the page at `/`, the rest under `/ui/`."""
    found = {}
    for entry in resources.files("plait.server").joinpath("static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if suffix in MEDIA_TYPES:
            route = "/" if entry.name == "index.html" else f"/ui/{entry.name}"
            found[route] = (entry.name, MEDIA_TYPES[suffix])
    return dict(sorted(found.items()))


#: route -> (file in `static/`, media type)
FILES: dict[str, tuple[str, str]] = _files()

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


def _instance(name: str) -> Callable[[], Awaitable[JSONResponse]]:
    async def instance() -> JSONResponse:
        return JSONResponse({"instance": name}, headers=HEADERS)

    return instance


def mount(app: FastAPI) -> None:
    """Add the dev page's routes to `app`: the page at `/`, its files under `/ui/`, and
    `/ui/instance`, `{"instance": id}` with an id new for each app (each `plait dev` reload
    makes a new app: the open page sees the id change and reads the agents again).

    These routes need no API key (the page holds no data) and are left out of the OpenAPI
    schema.
    """
    app.add_api_route(
        "/ui/instance",
        _instance(uuid.uuid4().hex),
        methods=["GET"],
        include_in_schema=False,
        name="dev page: the app's instance",
    )
    for path, (name, media_type) in FILES.items():
        app.add_api_route(
            path,
            _serve(read_static(name), media_type),
            methods=["GET"],
            include_in_schema=False,
            name=f"dev page: {name}",
        )

"""uvicorn's HTTP protocol, telling the app how many connections are open, so `serve --max-connections` is enforced
by the app and its 503 has the documented JSON shape.

uvicorn's own cap (`limit_concurrency`) answers past it with a plain-text "Service Unavailable" that the app never
sees. The count that cap uses is the right one, though: every open connection, including one that has sent half
its headers and is dripping the rest (which the app cannot see, as ASGI starts a request only once its headers are
complete). So this protocol leaves the counting to uvicorn and passes the count on: each request's scope carries
`OPEN_CONNECTIONS` (this worker's open connections, this one included) and `serving.create_app` answers over the
limit. uvicorn loads the class by its import string (`PROTOCOL`), in each worker of `--workers N` too.
"""

from __future__ import annotations

from uvicorn.protocols.http.auto import AutoHTTPProtocol  # httptools when installed, else h11: uvicorn's default

OPEN_CONNECTIONS = "litebert.open_connections"  # the scope key
PROTOCOL = "litebert.serving_connections:CountingHTTPProtocol"  # for uvicorn's `http=` setting


class CountingHTTPProtocol(AutoHTTPProtocol):  # one instance per connection
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        app, connections = self.app, self.connections  # (uvicorn's set of this worker's open connections)

        async def counted(scope, receive, send):
            scope[OPEN_CONNECTIONS] = len(connections)
            await app(scope, receive, send)

        self.app = counted

"""Moving a group's coordinator or a partition's leadership on demand (fault injection; filled in by issue 15)."""

from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()

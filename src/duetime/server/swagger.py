"""/docs: Swagger UI over the OpenAPI document, from files shipped in the package.

FastAPI's own /docs page loads Swagger UI from a CDN, so it is blank on a host without internet
access. This page loads the same Swagger UI from static/swagger-ui/ (swagger-ui-dist, vendored
with its license; static/swagger-ui/README.md says which version and how to update it), which
the app serves at /static/swagger-ui/.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

ASSETS = "/static/swagger-ui"

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI for this server's API; every URL it loads is on this server."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title="duetime API",
        swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS}/favicon-32x32.png",
        # no spec validation badge: it would send the document to validator.swagger.io
        swagger_ui_parameters={"validatorUrl": None},
    )

"""/docs (Swagger UI) works on a host without internet access: every URL the page loads is on
this server, and each answers 200."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from integration.apiclient import Api, running_api


class Urls(HTMLParser):
    """The src and href attributes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [v for k, v in attrs if k in ("src", "href") and v is not None]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with running_api(f"sqlite:///{tmp_path / 'docs.db'}") as api:
        yield api


def page_urls(html: str) -> list[str]:
    parser = Urls()
    parser.feed(html)
    # the OpenAPI document Swagger UI fetches, from the page's script
    return parser.found + re.findall(r"url: '([^']*)'", html)


def test_docs_page_loads_only_local_urls_and_each_answers(api: Api) -> None:
    page = api.client.get("/docs")
    assert page.status_code == 200
    assert "SwaggerUIBundle" in page.text
    urls = page_urls(page.text)
    assert any(u.endswith("swagger-ui-bundle.js") for u in urls), urls
    assert any(u.endswith("swagger-ui.css") for u in urls), urls
    assert "/openapi.json" in urls
    for url in urls:
        # on this server: a path, never another host (http://, https://, //cdn...)
        assert url.startswith("/") and not url.startswith("//"), url
        response = api.client.get(url)
        assert response.status_code == 200, url
        assert response.content, url
    # no badge that sends the document to swagger.io's online validator
    assert '"validatorUrl": null' in page.text


def test_swagger_ui_assets_ship_with_their_license(api: Api) -> None:
    for name in ("LICENSE", "NOTICE"):
        assert api.client.get(f"/static/swagger-ui/{name}").status_code == 200
    assert "Apache License" in api.client.get("/static/swagger-ui/LICENSE").text

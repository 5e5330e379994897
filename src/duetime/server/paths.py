"""Names in URL paths (docs/api.md, "Names in paths"): a route written `named("/queues/{name}")`
takes a queue, tenant, limit key or schedule name as `{name:name}`, which matches any text,
'/' and line breaks included.

Routes match the decoded path, so a name sent as one segment with its '/' escaped as %2F
arrives with the '/' back; Starlette's `str` convertor stops at '/' and its `path` convertor
at a line break, and either would leave such a name unreachable. A route with a suffix
(`/pause`) takes the longest name before it; the dashboard writes every name as one segment
(filters.segment)."""

from __future__ import annotations

import re

from starlette.convertors import Convertor, register_url_convertor


class NameConvertor(Convertor[str]):
    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("name", NameConvertor())


def named(template: str) -> str:
    """The route path with its {name} and {key} parameters taking any text."""
    return re.sub(r"\{(name|key)\}", r"{\1:name}", template)

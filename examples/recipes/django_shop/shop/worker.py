"""What the worker imports: `duetime worker --app shop.worker:jobs`. Django is set up before
the tasks load, so handlers can use the ORM."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
django.setup()

from shop.tasks import jobs  # noqa: E402

__all__ = ["jobs"]

"""The smallest Django settings the recipe runs with (a real project has its own)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

_db = urlsplit(os.environ["DJANGO_DATABASE_URL"])  # postgresql://user:password@host:port/name

SECRET_KEY = "recipe-only"
INSTALLED_APPS = ["shop"]
USE_TZ = True
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.path.lstrip("/"),
        "USER": _db.username or "",
        "PASSWORD": _db.password or "",
        "HOST": _db.hostname or "",
        "PORT": str(_db.port or ""),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "urls"

"""A small Django project for the duetime backend's tests. tests/django_backend/conftest.py sets
the environment: fresh databases per run (Django's SQLite file, a PostgreSQL database Django
and duetime share, and duetime's own SQLite and PostgreSQL databases)."""

import importlib.util
import os

SECRET_KEY = "duetime-tests"  # a test project
USE_TZ = True
INSTALLED_APPS = ["duetime.django", "taskapp"]
if importlib.util.find_spec("django.tasks") is None:  # Django before 6: the backport
    INSTALLED_APPS.append("django_tasks")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["DJANGO_TEST_SQLITE"],
    },
    "pg": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["DJANGO_TEST_PG_NAME"],
        "USER": os.environ["DJANGO_TEST_PG_USER"],
        "PASSWORD": os.environ.get("DJANGO_TEST_PG_PASSWORD", ""),
        "HOST": os.environ["DJANGO_TEST_PG_HOST"],
        "PORT": os.environ["DJANGO_TEST_PG_PORT"],
    },
}

TASKS = {
    # duetime's jobs in Django's PostgreSQL database: an enqueue in atomic() joins it
    "default": {
        "BACKEND": "duetime.django.DuetimeBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"DATABASE": "pg", "MAX_ATTEMPTS": 1},
    },
    # Django on SQLite, duetime on an SQLite database of its own: on_commit; one retry
    "sqlite_own": {
        "BACKEND": "duetime.django.DuetimeBackend",
        "OPTIONS": {
            "DATABASE_URL": os.environ["DJANGO_TEST_DUETIME_SQLITE_URL"],
            "MAX_ATTEMPTS": 2,
            "MODULES": ["taskapp.more"],
        },
    },
    # Django on PostgreSQL, duetime on another PostgreSQL database: on_commit; any queue name
    "pg_own": {
        "BACKEND": "duetime.django.DuetimeBackend",
        "QUEUES": [],
        "OPTIONS": {
            "DATABASE": "pg",
            "DATABASE_URL": os.environ["DJANGO_TEST_DUETIME_PG_URL"],
            "MAX_ATTEMPTS": 1,
        },
    },
}

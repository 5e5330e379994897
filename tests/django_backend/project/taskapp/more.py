"""Tasks outside the app's tasks module: the "sqlite_own" backend lists this module in its
OPTIONS MODULES, so that its worker runs them."""

from duetime.django.compat import task


@task(backend="sqlite_own")
def triple(x: int) -> int:
    return 3 * x

"""The light install: a worker needs no web stack; `duetime serve` without it says what to
install. Each check runs in a fresh interpreter, so what this test process imported does not
count."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB_STACK = ("fastapi", "starlette", "pydantic", "uvicorn", "jinja2", "multipart")


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_process_loads_no_web_stack(tmp_path: Path) -> None:
    result = run_python(
        f"""
        import sys

        import duetime
        import duetime.cli
        import duetime.runtime.worker

        app = duetime.App("sqlite:///{tmp_path / "light.db"}")

        @app.task(name="greet")
        def greet(name: str) -> None:
            pass

        app.enqueue("greet", {{"name": "Ada"}})
        duetime.cli.build_parser().parse_args(["worker", "--app", "tasks:app"])
        loaded = sorted({{m.partition(".")[0] for m in sys.modules}} & set({WEB_STACK!r}))
        print(",".join(loaded))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    # the web stack made impossible to import, as after `pip install duetime` alone
    result = run_python(
        f"""
        import sys
        from importlib.abc import MetaPathFinder

        class NotInstalled(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in {WEB_STACK!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        from duetime.cli import main

        sys.exit(main(["serve", "--database-url", "sqlite:///{tmp_path / "s.db"}"]))
        """,
        tmp_path,
    )
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "pip install 'duetime[server]'" in lines[0]
    assert lines[0].startswith("duetime: error: duetime serve needs the web server packages")


def test_the_web_stack_is_the_server_extra_not_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {r.split("[")[0].split(">")[0].split("=")[0].strip().lower() for r in requirements}

    web = {"fastapi", "uvicorn", "jinja2", "python-multipart", "starlette", "pydantic"}
    assert names(project["dependencies"]) & web == set()
    assert {"fastapi", "uvicorn", "jinja2", "python-multipart"} <= names(
        project["optional-dependencies"]["server"]
    )


def test_every_file_the_server_serves_is_in_the_wheel() -> None:
    # package-data globs do not descend into folders: each folder needs its own
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["duetime"]
    package = ROOT / "src" / "duetime"
    served = [p for p in (package / "server" / "static").rglob("*") if p.is_file()]
    assert any(p.parent.name == "swagger-ui" for p in served)
    for path in served:
        relative = path.relative_to(package)
        assert any(relative.match(pattern) for pattern in patterns), relative
    assert (ROOT / "LICENSE").read_text().startswith("\n                                 Apache")

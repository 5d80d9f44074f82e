"""The package's public API: `mindloop.__all__` names what users import, each name
resolves, `mindloop.testing` stays light, and the package ships `py.typed`."""

from __future__ import annotations

import importlib.resources
import subprocess
import sys
import tomllib
from pathlib import Path

import mindloop

REPO = Path(__file__).resolve().parents[2]


def test_every_exported_name_resolves_and_star_import_gives_them_all() -> None:
    assert mindloop.__all__ == sorted(mindloop._WHERE)  # the literal list and the table agree
    namespace: dict[str, object] = {}
    exec("from mindloop import *", namespace)
    assert set(mindloop.__all__) <= set(namespace)
    for name in ("open_project", "start_chat", "post", "answer", "retry", "run"):
        assert getattr(mindloop, name) is getattr(mindloop.service, name)
    assert mindloop.DialogRuntime.__name__ == "DialogRuntime"
    assert mindloop.Scheduler.__name__ == "Scheduler"
    assert callable(mindloop.load_config)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        mindloop.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("mindloop.no_such_thing resolved")


def test_importing_the_package_or_its_testing_models_does_not_load_the_engine() -> None:
    code = (
        "import sys, mindloop, mindloop.testing; "
        "print(sorted(m for m in sys.modules if m.startswith(('mindloop.dialogs', "
        "'mindloop.service', 'mindloop.store'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_package_ships_py_typed() -> None:
    assert importlib.resources.files("mindloop").joinpath("py.typed").is_file()
    data = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["mindloop"]

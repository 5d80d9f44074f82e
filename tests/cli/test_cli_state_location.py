"""Where a command says the state is: on PostgreSQL (`MINDLOOP_DATABASE_URL`) the
database, its password hidden — not `.mindloop/state.sqlite`, which does not exist there —
in the text a run ends with and in its `--json` summary (`state_file`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from mindloop.demo import DEMO_PROMPT, DEMO_TASK, prepare_demo_rtws
from mindloop.store.location import DATABASE_URL_ENV
from tests import pg
from tests.scenario_util import ml

PASSWORD = "s3cret-pw"  # the test server trusts loopback: any password is accepted


def _url_with_password() -> str:
    url = sa.make_url(pg.server().database_url()).set(password=PASSWORD)
    return url.render_as_string(hide_password=False)


def test_a_run_on_postgresql_names_the_database_not_a_state_file(tmp_path: Path) -> None:
    demo = prepare_demo_rtws(tmp_path / "demo")
    url = _url_with_password()
    shown = sa.make_url(url).render_as_string(hide_password=True)
    env = {DATABASE_URL_ENV: url}
    done = ml("-C", str(demo), "run", DEMO_TASK, "-m", DEMO_PROMPT, "--json", env=env)
    assert done.returncode == 4, done.stdout + done.stderr  # the PLAN question
    assert json.loads(done.stdout)["state_file"] == shown
    again = ml("-C", str(demo), "run", DEMO_TASK, env=env)
    assert again.returncode == 4, again.stdout + again.stderr
    assert f"state in {shown}" in again.stdout, again.stdout
    for out in (done, again):
        assert "state.sqlite" not in out.stdout and PASSWORD not in out.stdout + out.stderr
    assert not (demo / ".mindloop" / "state.sqlite").exists()


@pytest.mark.sqlite_only
def test_a_run_on_sqlite_names_its_state_file(tmp_path: Path) -> None:
    demo = prepare_demo_rtws(tmp_path / "demo")
    done = ml("-C", str(demo), "run", DEMO_TASK, "-m", DEMO_PROMPT, "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    state = json.loads(done.stdout)["state_file"]
    assert state == str(demo / ".mindloop" / "state.sqlite")
    assert Path(state).is_file()

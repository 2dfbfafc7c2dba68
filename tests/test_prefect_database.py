"""The migrated Prefect database the tests' servers start from (prefect_database.py)."""

from __future__ import annotations

import sqlite3

import pytest

import prefect_database


def test_a_seeded_home_has_a_copy_of_the_migrated_database_and_a_database_is_never_replaced(
        tmp_path):
    template = prefect_database.make_template()
    assert template is not None, "Prefect could not make its database here"
    with sqlite3.connect(template) as database:  # migrated: Prefect's tables and revision
        assert database.execute("SELECT version_num FROM alembic_version").fetchall()
        assert database.execute("SELECT count(*) FROM flow_run").fetchone() == (0,)
    database.close()
    home = prefect_database.seeded_home(tmp_path / "home")
    copied = home / "prefect.db"
    assert copied.read_bytes() == template.read_bytes()
    copied.write_bytes(b"a server's own data")
    prefect_database.seeded_home(home)
    assert copied.read_bytes() == b"a server's own data"
    assert [p.name for p in home.iterdir()] == ["prefect.db"]  # no partial copy left


def test_a_cache_that_cannot_be_written_leaves_each_server_its_own_migrations(tmp_path,
                                                                              monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(prefect_database, "CACHE", tmp_path / "a-file" / "cache")
    with pytest.warns(UserWarning, match="each migrates its own"):
        assert prefect_database.make_template() is None
    home = prefect_database.seeded_home(tmp_path / "home")
    assert list(home.iterdir()) == []  # no database: the server makes and migrates its own

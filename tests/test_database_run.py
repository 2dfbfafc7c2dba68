"""`proactflow run --database`: the per-call cache, its leases and the rate limits in
PostgreSQL (a real server), shared by runs on different stores as by runs on different hosts."""

from __future__ import annotations

import asyncio
import json

import pytest

from helpers import cli_args, read_json, run_cli
from ports import reserved_port


def request_identity(request: dict) -> str:
    return json.dumps([request["model"], request["messages"]], sort_keys=True)


def stored_calls(url: str) -> int:
    import asyncpg

    async def count() -> int:
        connection = await asyncpg.connect(url)
        try:
            return await connection.fetchval("SELECT count(*) FROM proactflow_calls")
        finally:
            await connection.close()

    return asyncio.run(count())


def flow_run_parameters() -> str:
    from prefect.client.orchestration import get_client

    async def read() -> str:
        async with get_client() as client:
            runs = await client.read_flow_runs(limit=10)
            return json.dumps([run.parameters for run in runs], default=str)

    return asyncio.run(read())


def test_a_run_on_a_database_pays_each_call_once_and_shows_no_secret(
        fake, tmp_path, postgres_server, capsys, caplog, monkeypatch, prefect_server):
    user = "pf_user_5531"  # a name of its own, to search for
    url = postgres_server.create_database(owner=user)
    password = "pg-PLANTED-password-8812"
    monkeypatch.setenv("PGPASSWORD", password)  # trust authentication ignores it: shown nowhere
    stores, outs = [tmp_path / "store1", tmp_path / "store2"], [tmp_path / "out1",
                                                                 tmp_path / "out2"]

    def args(i: int) -> list[str]:
        return cli_args(fake, stores[i], eval_model="openai/synth", judge_model="openai/judge2",
                        extra=("--limit", "2", "--database", url, "--rpm", "6000",
                               "--tpm", "10000000", "--out", str(outs[i])))

    assert run_cli("run", args(0)) == 0
    made = [request_identity(r) for r in fake.requests]
    assert made and len(made) == len(set(made))  # every call paid once
    assert stored_calls(url) == len(made)  # and stored in the database, not the store
    assert not (stores[0] / "calls").exists()
    first_out = capsys.readouterr().out
    assert f"database    postgresql://***@127.0.0.1:{postgres_server.port}/" in first_out

    # Another store (as another host would have) finds every answer in the database.
    fake.reset_counts()
    assert run_cli("run", args(1)) == 0
    assert sum(fake.calls.values()) == 0
    assert (outs[0] / "results.jsonl").read_text() == (outs[1] / "results.jsonl").read_text()

    record = read_json(next((stores[1] / "runs").glob("*.json")))
    assert record["settings"]["database"] == url  # its user name is no secret (issue #20)
    captured = capsys.readouterr()
    shown = captured.out + captured.err + caplog.text + flow_run_parameters()
    for secret in (password,):
        assert secret not in shown
        for folder in (*stores, *outs):
            for path in folder.rglob("*"):
                if path.is_file():
                    assert secret.encode() not in path.read_bytes(), (secret, path)


def test_a_password_in_the_database_url_is_refused_before_any_call(fake, store, capsys):
    url = "postgresql://bob:hunter22@127.0.0.1:5432/proactflow"
    assert run_cli("run", cli_args(fake, store, extra=("--database", url))) == 2
    err = capsys.readouterr().err
    assert err == ("proactflow: error: the database URL must not hold a password: give it in "
                   "PGPASSWORD or ~/.pgpass (libpq's conventions) instead\n")
    assert sum(fake.calls.values()) == 0


def test_an_unreachable_database_is_one_line_before_any_call(fake, store, capsys):
    with reserved_port() as port:
        url = f"postgresql://carol@127.0.0.1:{port}/proactflow"
        assert run_cli("run", cli_args(fake, store, extra=("--database", url))) == 2
    err = capsys.readouterr().err
    assert err == (f"proactflow: error: database 127.0.0.1:{port}/proactflow refused the "
                   "connection: is PostgreSQL running there, on that port?\n")
    assert sum(fake.calls.values()) == 0


def test_a_sweep_file_names_the_database_for_every_pair(tmp_path):
    from proactflow.common.errors import UserError
    from proactflow.sweeps.sweep_file import load_sweep

    path = tmp_path / "sweep.toml"
    path.write_text('database = "postgresql://dave@db.lan/evals"\n'
                    '[[judges]]\nmodel = "openai/j"\n'
                    '[[models]]\nmodel = "openai/a"\n[[models]]\nmodel = "openai/b"\n')
    config = load_sweep(path)
    assert {run.database for run in config.runs()} == {"postgresql://dave@db.lan/evals"}
    assert config.model_dump(mode="json")["database"] == "postgresql://dave@db.lan/evals"
    path.write_text(path.read_text().replace("dave@", "dave:pw@"))
    with pytest.raises(UserError, match="PGPASSWORD"):
        load_sweep(path)

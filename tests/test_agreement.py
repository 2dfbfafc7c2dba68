"""Judge agreement: kappa against a hand computation, and the agreement of two judges end to end."""

from __future__ import annotations

import polars as pl
import pytest

from proactflow.suites.proactbench.agreement import cohen_kappa, confusion, judge_agreement

A = ["PASS", "PASS", "FAIL", "PARTIAL", "PASS", "FAIL"]
B = ["PASS", "FAIL", "FAIL", "PARTIAL", "PARTIAL", "FAIL"]


def test_kappa_matches_a_hand_computation():
    matrix = confusion(list(zip(A, B)))
    assert matrix == [[2, 0, 0],    # A said FAIL:    B FAIL 2
                      [0, 1, 0],    # A said PARTIAL: B PARTIAL 1
                      [1, 1, 1]]    # A said PASS:    B FAIL 1, PARTIAL 1, PASS 1
    # p_o = 4/6; A: FAIL 1/3, PARTIAL 1/6, PASS 1/2; B: FAIL 1/2, PARTIAL 1/3, PASS 1/6;
    # p_e = 1/3*1/2 + 1/6*1/3 + 1/2*1/6 = 11/36; kappa = (24/36 - 11/36) / (25/36) = 13/25.
    assert cohen_kappa(matrix) == pytest.approx(13 / 25)
    # Quadratic weights 1, 3/4, 0 for distance 0, 1, 2: observed 4.75/6 = 57/72,
    # expected 43/72, so kappa_w = (57 - 43) / (72 - 43) = 14/29.
    assert cohen_kappa(matrix, quadratic=True) == pytest.approx(14 / 29)


def test_perfect_and_degenerate_agreement():
    assert cohen_kappa(confusion([("PASS", "PASS"), ("FAIL", "FAIL")])) == pytest.approx(1.0)
    assert cohen_kappa(confusion([("PASS", "PASS")] * 3)) is None  # chance agreement is total
    assert cohen_kappa(confusion([])) is None


def test_agreement_table_and_disagreements():
    def rows(judge, scores):
        return [{"model": "m", "judge": judge, "unique_id_eval": f"d{i}", "turn": 1,
                 "sample_index": 0, "phase": "EMERGENT" if i < 3 else "CRITICAL",
                 "status": "scored", "score": s, "rationale": f"{judge} on d{i}"}
                for i, s in enumerate(scores)]

    judgments = pl.DataFrame(rows("j1", A) + rows("j2", B))
    table, disagreements = judge_agreement(judgments)
    overall = table.filter(pl.col("phase") == "OVERALL").row(0, named=True)
    assert (overall["judge_a"], overall["judge_b"], overall["n"]) == ("j1", "j2", 6)
    assert overall["percent_agreement"] == pytest.approx(4 / 6)
    assert overall["kappa"] == pytest.approx(13 / 25)
    assert table.filter(pl.col("phase") == "EMERGENT")["n"][0] == 3
    assert disagreements.height == 2
    first = disagreements.sort("unique_id_eval").row(0, named=True)
    assert (first["unique_id_eval"], first["score_a"], first["score_b"]) == ("d1", "PASS", "FAIL")
    assert (first["rationale_a"], first["rationale_b"]) == ("j1 on d1", "j2 on d1")


@pytest.mark.parametrize("tracked", [True, False], ids=["prefect", "no-prefect-server"])
def test_rejudge_with_several_judges_reports_their_agreement(fake, store, tmp_path, capsys,
                                                             prefect_server, monkeypatch,
                                                             tracked):
    from helpers import cli_args, run_cli

    if not tracked:  # as without PREFECT_API_URL: the stages run without Prefect
        monkeypatch.setattr("proactflow.cli.running.reports_to_prefect", lambda: False)

    limit = ("--limit", "3")
    assert run_cli("run", cli_args(fake, store, extra=limit)) == 0
    fake.reset_counts()
    out = tmp_path / "judges"
    args = cli_args(fake, store, extra=(*limit, "--judges", "openai/judge,openai/judge2",
                                        "--out", str(out)))
    assert run_cli("rejudge", args) == 0
    assert fake.calls["gen"] == 0 and fake.calls["judge"] == 0  # cached already
    assert fake.calls["judge2"] == 7  # the answerable triggers of the first 3 dialogues
    table = pl.read_csv(out / "agreement.csv")
    overall = table.filter(pl.col("phase") == "OVERALL").row(0, named=True)
    assert (overall["judge_a"], overall["judge_b"], overall["n"]) == \
        ("openai/judge", "openai/judge2", 7)
    disagreements = pl.read_csv(out / "disagreements.csv")
    assert overall["percent_agreement"] == pytest.approx(1 - disagreements.height / 7)
    assert (out / "openai_judge2" / "metrics.json").exists()
    assert "Judge agreement" in capsys.readouterr().out

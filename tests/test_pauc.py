"""PAUC as the video ProactiveBench defines it: the worked values of the shared facts (window
[3, 7]), the judge plan, the first-character parse, the late-lower rule, duplicates,
overlapping windows, replies outside every window, L = 0 and the per-part table."""

from __future__ import annotations

import pytest

from proactflow.suites.proactivebench_video.pauc import (
    NO_REPLY_SCORE, OMEGAS, Reply, TurnResult, UnreadableScore, apply_late_lower_rule,
    bootstrap_interval, in_window, judge_plan, omega_column, parse_judge_score, part_metrics,
    score_turn, turn_pauc)

WORKED = [  # (replies as (time, judge score)), PAUC at omega 0, 0.5, 1: the facts' table
    ([], (0.25, 0.25, 0.25)),
    ([(4, 3)], (0.8125, 0.90625, 1.0)),
    ([(7, 3)], (0.25, 0.625, 1.0)),
    ([(4, 2), (6, 3)], (0.5625, 0.78125, 1.0)),
    ([(4, 1)], (0.0625, 0.03125, 0.0)),
]


@pytest.mark.parametrize("points,expected", WORKED, ids=lambda v: str(v))
def test_every_worked_value_of_the_table(points, expected):
    for omega, value in zip(OMEGAS, expected):
        assert turn_pauc(points, 3, 7, omega) == pytest.approx(value, abs=1e-12)
        judged = [(time, str(score)) for time, score in points]
        scored = score_turn(judged, 3, 7, related_end=7)
        assert scored.status == "scored" and scored.pauc[omega] == pytest.approx(value)


def test_silence_scores_above_a_wrong_reply_and_below_a_right_one():
    silent = score_turn([], 3, 7, 7)
    wrong = score_turn([(4, "1")], 3, 7, 7)
    right = score_turn([(4, "3")], 3, 7, 7)
    for omega in OMEGAS:
        assert wrong.pauc[omega] <= silent.pauc[omega] == NO_REPLY_SCORE < right.pauc[omega]
    assert (silent.final_score, silent.judged) == (None, 0)


def test_the_judge_plan_sends_the_replies_so_far_once_per_distinct_in_window_reply():
    replies = [Reply(2, "too early"), Reply(4, "a cat"), Reply(5, "a cat"), Reply(6, "a dog"),
               Reply(7, "a dog and a cat"), Reply(8, "too late")]
    plan = judge_plan("What animals?", "A cat and a dog", replies, 3, 7)
    assert [(r.time, r.replies) for r in plan] == [
        (4, "a cat"), (6, "a cat a dog"), (7, "a cat a dog a dog and a cat")]
    assert plan[1].user_message == ("Question: What animals?\nGround Truth Answer: A cat and a "
                                    "dog\nPredicted Answer: a cat a dog")


def test_window_bounds_are_inclusive_and_duplicates_keep_the_first():
    replies = [Reply(3, "x"), Reply(7, "y"), Reply(2.999, "z"), Reply(7.001, "w"),
               Reply(5, "x")]
    assert in_window(replies, 3, 7) == [Reply(3, "x"), Reply(7, "y")]
    # A repeat that differs in any character is a new reply, judged again.
    assert [r.text for r in in_window([Reply(4, "x"), Reply(5, "x ")], 3, 7)] == ["x", "x "]


@pytest.mark.parametrize("text,score", [("3", 3), ("2 - partially", 2), ("1\n", 1),
                                        ("3.5", 3)])
def test_the_score_is_the_first_character(text, score):
    assert parse_judge_score(text) == score


@pytest.mark.parametrize("text", ["", " 3", "Score: 3", "0", "4", "**3**"])
def test_anything_else_is_unreadable_and_the_turn_a_judge_error(text):
    with pytest.raises(UnreadableScore):
        parse_judge_score(text)
    turn = score_turn([(4, "3"), (5, text)], 3, 7, 7)
    assert (turn.status, turn.pauc, turn.judged) == ("judge_error", {}, 2)


def test_a_late_lower_score_is_deleted_a_late_higher_one_kept():
    # related window ends at 5: the reply at 6 (score 2) is late and lower than 3 at 4
    assert apply_late_lower_rule([(4, 3), (6, 2)], 5) == [(4, 3)]
    assert apply_late_lower_rule([(4, 2), (6, 3), (7, 1)], 5) == [(4, 2), (6, 3)]
    # equal is not lower; a reply exactly at the related end is on time
    assert apply_late_lower_rule([(4, 2), (5, 1), (6, 1)], 5) == [(4, 2), (5, 1), (6, 1)]
    # nothing on time: nothing to compare with, every late score stays
    assert apply_late_lower_rule([(6, 1), (7, 3)], 5) == [(6, 1), (7, 3)]
    turn = score_turn([(4, "3"), (6, "2")], 3, 7, related_end=5)
    assert turn.late_lower_deleted == 1 and turn.final_score == 3
    assert turn.pauc[0.0] == pytest.approx(0.8125)  # as if only 4: 3 were said
    kept = score_turn([(4, "3"), (6, "2")], 3, 7, related_end=6)
    assert kept.late_lower_deleted == 0 and kept.pauc[0.0] == pytest.approx(
        (0.5 * 1 + 2 * 2 + 1 * 1) / 8)


def test_overlapping_windows_each_judge_the_replies_in_their_own_window():
    replies = [Reply(3, "green"), Reply(5, "blue"), Reply(7, "green and blue")]
    first = judge_plan("Which squares?", "A green square", replies, 2, 6)
    second = judge_plan("Which squares?", "A blue square", replies, 4, 8)
    assert [r.replies for r in first] == ["green", "green blue"]
    assert [r.replies for r in second] == ["blue", "blue green and blue"]
    # the reply at 5 counts for both turns, each with its own score and window
    first_score = score_turn([(3, "3"), (5, "3")], 2, 6, 5)
    second_score = score_turn([(5, "3"), (7, "3")], 4, 8, 7)
    assert first_score.pauc[0.0] == pytest.approx((0.5 * 1 + 2 * 3) / 8)
    assert second_score.pauc[0.0] == pytest.approx((0.5 * 1 + 2 * 3) / 8)


def test_a_reply_outside_every_window_is_never_judged():
    replies = [Reply(1, "early"), Reply(9, "late")]
    assert judge_plan("q", "a", replies, 3, 7) == []
    assert score_turn([], 3, 7, 7).pauc == {omega: NO_REPLY_SCORE for omega in OMEGAS}


def test_a_window_of_one_instant_takes_the_formulas_limit():
    assert turn_pauc([], 5, 5, 0.0) == NO_REPLY_SCORE
    for omega in OMEGAS:
        assert turn_pauc([(5, 3)], 5, 5, omega) == 1.0
        assert turn_pauc([(5, 3), (5, 2)], 5, 5, omega) == 0.5
        assert turn_pauc([(5, 1)], 5, 5, omega) == 0.0
    # the limit: a window shrinking around a reply at its start tends to the same value
    assert turn_pauc([(5, 2)], 5, 5 + 1e-9, 0.0) == pytest.approx(turn_pauc([(5, 2)], 5, 5, 0.0))
    with pytest.raises(ValueError):
        turn_pauc([], 7, 3, 0.0)


def _turn(part, sample, status="scored", pauc=0.5, final=None):
    from proactflow.suites.proactivebench_video.pauc import TurnScore
    values = {omega: pauc for omega in OMEGAS} if status == "scored" else {}
    return TurnResult(part, sample, TurnScore(status, values, 1, final, 0))


def test_part_metrics_are_turn_weighted_means_with_seeded_intervals():
    turns = [_turn("WEB", "a", pauc=1.0, final=3), _turn("WEB", "a", pauc=1.0, final=3),
             _turn("WEB", "a", pauc=1.0, final=2), _turn("WEB", "b", pauc=0.25),
             _turn("WEB", "b", "judge_error"), _turn("WEB", "d", "error"),
             _turn("TV", "c", pauc=0.0, final=1)]
    rows = part_metrics(turns, samples=200, seed=1)
    assert [row["part"] for row in rows] == ["TV", "WEB"]
    web = rows[1]
    assert list(web)[:5] == ["part", "turns", "pauc_0", "pauc_0.5", "pauc_1"]
    # turn-weighted: (1 + 1 + 1 + 0.25) / 4, not the mean of the samples' means (0.625)
    assert web["turns"] == 4 and web["pauc_0"] == pytest.approx(81.25)
    assert (web["judge_errors"], web["generation_errors"], web["errors"]) == (1, 0, 1)
    assert (web["answered"], web["final_score_mean"], web["final_3"], web["final_2"]) == \
        (3, pytest.approx(8 / 3), 2, 1)
    assert web["pauc_0_ci_low"] <= web["pauc_0"] <= web["pauc_0_ci_high"]
    assert web["pauc_0_ci_low"] >= 25 and web["pauc_0_ci_high"] <= 100
    assert part_metrics(turns, samples=200, seed=1) == rows
    assert rows[0]["pauc_1"] == 0.0 and rows[0]["pauc_0_ci_low"] == 0.0
    assert omega_column(0.5) == "pauc_0.5"


def test_the_bootstrap_resamples_samples_not_turns():
    # one sample of 3 perfect turns, one of 1 zero turn: draws are 0, 25, 75 or 100 x 100/100
    low, high = bootstrap_interval([(3.0, 3), (0.0, 1)], samples=400, seed=0)
    assert low == pytest.approx(0.0) and high == pytest.approx(100.0)
    assert bootstrap_interval([(0.0, 0)], samples=10) == (None, None)

"""Unit tests of the multimodal ProactiveBench's environments, offline: reply reading, option
removal, crop boxes, stop rules, images, OEG parsing, the corpus reader and the dataset names."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from mllm_corpus import generate_corpus
from proactflow.common.errors import UserError
from proactflow.suites.proactivebench_mllm import oeg
from proactflow.suites.proactivebench_mllm.corpus import (check_first_images, parse_entry,
                                                          read_dataset)
from proactflow.suites.proactivebench_mllm.datasets import BY_SHORT, parse_datasets
from proactflow.suites.proactivebench_mllm.environment import (
    abandon, play, read_reply, start, statistics, step, stop_reason, view)
from proactflow.suites.proactivebench_mllm.environment.images import image_bytes, pixel_digest, shown_image
from proactflow.suites.proactivebench_mllm.environment.replies import full_text, letter
from proactflow.suites.proactivebench_mllm.sample import LEFT, EnvironmentCrash
from proactflow.suites.proactivebench_mllm.scores import mcqa_scores

MOVE_LEFT = "Move the occluding object to the left."
MOVE_RIGHT = "Move the occluding object to the right."


def sample(short: str, **fields):
    entry = {"id": 1, "image_template": "x/{image}.png", "first_image": 0, "num_images": 3,
             "reference_image": 0, "prompt": "What is it?",
             "options": [MOVE_LEFT, MOVE_RIGHT, "I cannot answer."],
             "categories": ["apple", "banana", "kettle"], "answer": "banana"}
    entry.update(fields)
    return parse_entry(entry, BY_SHORT[short], "test.jsonl", 1)


def vsod(**fields):
    base = {"options": ["Wait for the occluding person to move.", "Rewind the video.",
                        "I cannot answer."], "strong_occlusions": True}
    return sample("VSOD", **{**base, **fields})


def cit(**fields):
    base = {"options": ["Wait for the action to happen.", "Rewind the video.",
                        "I cannot answer."], "step_size": 2, "max_steps": 4, "num_images": 7}
    return sample("CIT", **{**base, **fields})


def coco(direction: str, **fields):
    options = {"zoom": ["Move farther from the object."],
               "left": ["Move the camera to the left."],
               "up_left": ["Move the camera up.", "Move the camera to the left."]}[direction]
    base = {"image_template": "c.png", "num_images": 1, "options": options + ["I cannot answer."],
            "direction": direction, "granularity": 2, "horizontal_step": 10,
            "vertical_step": 4, "crop": {"top": 20, "left": 30, "height": 40, "width": 50}}
    return sample("COCO", **{**base, **fields})


# Reading replies

def test_letter_reading_is_strict():
    assert [letter(r) for r in ["C", " c ", "C. anything", "(C)", "C)", "Answer: C", ""]] == [
        "c", "c", "c", "#", "#", "#", ""]


def test_full_text_drops_everything_up_to_the_last_capital_and_period():
    assert full_text("The answer is B. banana") == "banana"
    assert full_text("C. BaNaNa ") == "banana"
    assert full_text("Move the occluding object to the left.") == "movetheoccludingobjecttotheleft."


def test_both_reads_of_a_reply():
    s, state = vsod(), start(vsod())
    # "A" is the first action, "E" (shifted past three actions) the category banana.
    assert read_reply(s, state, "A").action_evaluation == "correct"
    assert read_reply(s, state, "E").category_evaluation == "correct"
    assert read_reply(s, state, "E").action_evaluation == "mismatch"
    assert read_reply(s, state, "The answer is B. banana").category_evaluation == "correct"
    unreadable = read_reply(s, state, "(E)")
    assert (unreadable.action_evaluation, unreadable.category_evaluation) == ("mismatch",
                                                                              "mismatch")
    # One reply, two readings: letter A is an action, "apple" a (wrong) category.
    both = read_reply(s, state, "A. apple")
    assert (both.action_evaluation, both.category_evaluation) == ("correct", "wrong")
    # An option's text without its final period matches nothing.
    assert read_reply(s, state, "Rewind the video").action_evaluation == "mismatch"


# Stop rules

def test_unreadable_reply_ends_the_episode_as_wrong():
    end = play(vsod(), ["(E)"])
    assert end.stop and not end.correct_prediction and stop_reason(end) == "unreadable"
    assert stop_reason(play(vsod(), ["apple"])) == "wrong"


def test_rod_first_step_accepts_only_actions_and_the_corrupted_frame():
    s = sample("ROD")
    assert stop_reason(play(s, ["banana"])) == "wrong"
    assert play(s, [MOVE_RIGHT, "banana"]).correct_prediction
    corrupt = sample("ROD", image_template="r/natural_bluebl_greenr-banana-s{image}/i.png",
                     num_images=8, first_image=7)
    after_left = step(corrupt, start(corrupt), MOVE_LEFT)
    assert after_left.action == LEFT
    assert view(corrupt, after_left).image == "r/natural_bluebl_greenr-banana-s5/i.png"
    after_right = step(corrupt, step(corrupt, start(corrupt), MOVE_RIGHT), MOVE_RIGHT)
    assert after_right.image_id == 1  # 7 -> 0 -> 1: moves wrap around
    wrapped = step(corrupt, step(corrupt, step(corrupt, start(corrupt), MOVE_RIGHT), MOVE_RIGHT),
                   MOVE_LEFT)
    assert wrapped.image_id == 0


def test_step_limit_after_an_accepted_action():
    end = play(vsod(num_images=2), ["A", "A"])
    assert stop_reason(end) == "max_steps" and statistics(vsod(num_images=2), end)["max_steps"]
    assert [t.image_id for t in end.turns] == [0, 1]
    with pytest.raises(ValueError):
        step(vsod(num_images=2), end, "A")


def test_last_step_of_mvpn_accepts_only_categories_and_shows_the_informative_view():
    s = sample("MVP-N", image_template="m/{informative}_{image}.png", num_images=2,
               valid_images=[5, 9], first_image=5, options=["Rotate the object.", "I cannot."])
    first = start(s)
    assert view(s, first).image == "m/0_0005.png"
    second = step(s, first, "Rotate the object.")
    assert view(s, second).image == "m/1_0009.png"
    assert stop_reason(step(s, second, "Rotate the object.")) == "wrong"
    assert step(s, second, "banana").correct_prediction


def test_inc_accepts_only_the_quality_answer_and_crashes_below_level_one():
    options = ["Increase the brightness.", "Deblur the image.", "I do not know."]
    s = sample("IN-C", image_template="i/{level}.png", first_image=2, num_images=3,
               options=options, quality_answer="Deblur the image.")
    assert stop_reason(play(s, ["Increase the brightness."])) == "wrong"
    once = play(s, ["Deblur the image."])
    assert view(s, once).image == "i/1.png"
    with pytest.raises(EnvironmentCrash):
        step(s, once, "Deblur the image.")


def test_a_qd_option_naming_two_actions_crashes_like_the_package():
    s = sample("QD", image_template="q/{image}.png",
               options=["Add more details to the drawing.", "I cannot answer."])
    with pytest.raises(EnvironmentCrash):
        step(s, start(s), "A")


# ChangeIt and COCO option removal

def test_changeit_removes_rewind_at_the_start_and_wait_at_the_end():
    s = cit(first_image=1)
    assert view(s, start(s)).options[:2] == ("Wait for the action to happen.", "I cannot answer.")
    assert view(s, start(s)).question.startswith("This is a frame extracted from a video. ")
    end = cit(first_image=5)
    assert view(end, start(end)).options[:2] == ("Rewind the video.", "I cannot answer.")
    assert step(end, start(end), "Rewind the video.").image_id == 3
    # Quirk: without a "Wait for the" option the last option is removed instead.
    quirk = cit(first_image=5, options=["Rewind the video.", "I cannot answer."])
    assert view(quirk, start(quirk)).options == ("Rewind the video.", "apple", "banana", "kettle")


def test_coco_drops_moves_once_exhausted_and_crops():
    s = coco("left")
    state = start(s)
    assert view(s, state).crop == (20, 20, 50, 40)  # width and height taken as right/bottom
    state = step(s, state, "A")
    assert state.horizontal_step == 20.0
    assert view(s, state).options[0] == "I cannot answer."  # 20 >= 10 x granularity 2
    zoom = coco("zoom")
    assert view(zoom, start(zoom)).crop == (20, 16, 90, 64)  # left+width+h, top+height+v
    two = play(zoom, ["A", "A"])
    assert (two.horizontal_step, two.vertical_step) == (30.0, 12.0)
    assert "Move farther from the object." not in view(zoom, two).options
    assert stop_reason(play(zoom, ["A", "A", "A"])) == "wrong"
    diagonal = coco("up_left")
    assert view(diagonal, start(diagonal)).crop == (20, 16, 50, 40)


# Images

def test_image_bytes_are_the_file_for_the_identity_and_a_lossless_crop_otherwise(tmp_path):
    entries = generate_corpus(tmp_path, per_dataset=4, seed=3)
    rod = read_dataset(tmp_path, BY_SHORT["ROD"])[1]
    shown = view(rod, start(rod))
    data, media = image_bytes(tmp_path, shown)
    assert data == (tmp_path / shown.image).read_bytes() and media == "image/png"
    zoom = read_dataset(tmp_path, BY_SHORT["COCO"])[0]
    assert entries["COCO"][0]["direction"] == "zoom"
    cropped = view(zoom, start(zoom))
    data, media = image_bytes(tmp_path, cropped)
    decoded = Image.open(io.BytesIO(data))
    left, top, right, bottom = cropped.crop or (0, 0, 0, 0)
    assert decoded.size == (right - left, bottom - top)  # never resized
    assert pixel_digest(decoded) == pixel_digest(shown_image(tmp_path, cropped))


def test_files_with_alpha_are_sent_as_the_rgb_the_environment_shows(tmp_path):
    s = sample("QD", image_template="q/{image}.png", num_images=1,
               options=["Provide a more detailed sketch.", "I cannot answer."])
    (tmp_path / "q").mkdir()
    Image.new("RGBA", (5, 4), (200, 10, 10, 0)).save(tmp_path / "q" / "0000.png")
    data, media = image_bytes(tmp_path, view(s, start(s)))
    assert media == "image/png" and Image.open(io.BytesIO(data)).mode == "RGB"
    assert pixel_digest(Image.open(io.BytesIO(data))) == pixel_digest(
        Image.new("RGB", (5, 4), (200, 10, 10)))
    Image.new("RGB", (5, 4), (1, 2, 3)).save(tmp_path / "q" / "0000.png", format="JPEG")
    data, media = image_bytes(tmp_path, view(s, start(s)))
    assert media == "image/jpeg" and data == (tmp_path / "q" / "0000.png").read_bytes()


def test_an_empty_crop_abandons_the_episode_where_it_stands():
    s = coco("left", crop={"top": 20, "left": 30, "height": 40, "width": 10},
             horizontal_step=20)
    shown = view(s, start(s))
    assert shown.crop == (10, 20, 10, 40) and shown.empty
    with pytest.raises(ValueError):
        image_bytes(".", shown)
    ended = abandon(start(s))
    assert ended.stop and stop_reason(ended) == "image_error" and not ended.correct_prediction


def test_missing_images_are_found_before_any_call(tmp_path):
    generate_corpus(tmp_path, per_dataset=3, seed=2)
    samples = read_dataset(tmp_path, BY_SHORT["MVP-N"])
    check_first_images(tmp_path, samples)
    with pytest.raises(UserError, match=r"image\(s\) missing under"):
        check_first_images(tmp_path / "MVP-N", samples)


# OEG

def test_oeg_parsing_and_wrong_lengths():
    answers = "Move the blocks, Move the camera."
    assert oeg.parse_verdicts(answers, "thinking 1,1,1 done\n0, 1", 2).ps == 1
    wrong = oeg.parse_verdicts(answers, "1,1,1", 2)
    assert wrong.status == "judge_error" and wrong.ps is None
    assert oeg.upstream_verdict(answers, "1,1,1", 2) == (0, 0, 0)
    assert oeg.parse_verdicts(answers, "no list", 2).status == "judge_error"
    ok = oeg.parse_verdicts("Add more details to the drawing, apple.", "0,1", 1)
    assert (ok.ps, ok.cp, ok.agg) == (0, 1, 1)
    assert oeg.visible_output("<think>1,0</think>\n0,1\n") == "0,1"
    scores = oeg.oeg_scores([ok, wrong], [(0, 1, 1), (0, 0, 0)])
    assert (scores.cp, scores.judge_errors, scores.upstream_cp) == (100.0, 1, 50.0)


def test_changeit_answers_grow_on_a_second_call_away_from_the_ends():
    middle = cit(first_image=3, categories=["tying a knot", "pouring water"],
                 answer="pouring water")
    first, second = oeg.valid_answers(middle, 1), oeg.valid_answers(middle, 2)
    assert first == ("Wait for the action to happen,Rewind the video,Rewind the video,"
                     "pouring water.")
    assert oeg.expected_items(second) == oeg.expected_items(first) + 1
    edge = cit(first_image=0)
    assert oeg.valid_answers(edge, 1) == oeg.valid_answers(edge, 2)


def test_judge_sample_parses_ours_against_the_first_call_and_the_package_against_the_second():
    from proactflow.suites.proactivebench_mllm.upstream import Upstream

    upstream = Upstream(filter={}, system_prompt="S", user_prompt="{user_prompt}|"
                        "{correct_answers}|{generated_answer}", prediction_thr={"CIT": 2},
                        source="test")
    middle = cit(first_image=3, categories=["tying a knot", "pouring water"],
                 answer="pouring water")
    messages = oeg.oeg_messages(upstream, middle, "wait", use_hints=True)
    assert messages[1]["content"].endswith("please tell me what I should do to help you.|"
                                           "['Wait for the action to happen', 'Rewind the video',"
                                           " 'Rewind the video', 'pouring water']|wait")
    ours, package = oeg.judge_sample(upstream, middle, "<think>x</think>1,0,0,1")
    assert (ours.status, ours.ps, ours.cp) == ("ok", 1, 1)
    assert package == (0, 0, 0)  # four verdicts, five answers on the package's second call


def test_oeg_selection_is_the_packages_seeded_shuffle():
    chosen = oeg.select_oeg_samples(list(range(150)))
    assert len(chosen) == 100 and chosen == oeg.select_oeg_samples(list(range(150)))
    assert chosen != list(range(100))


def test_mcqa_scores():
    ends = [play(vsod(), ["banana"]), play(vsod(), ["A", "A", "banana"]), play(vsod(), ["x"])]
    scores = mcqa_scores(ends)
    assert (scores.samples, scores.acc, scores.ps) == (3, pytest.approx(200 / 3), 2 / 3)


# Corpus and dataset names

def test_datasets_by_short_or_full_name():
    assert [d.short for d in parse_datasets("coco2014, ROD,IN-C")] == ["ROD", "IN-C", "COCO"]
    assert len(parse_datasets(None)) == 7
    with pytest.raises(UserError, match=r"unknown 'ROD2'; valid: ROD \(Realistic"):
        parse_datasets("ROD2,QD")


def test_corpus_selection_and_errors(tmp_path):
    generate_corpus(tmp_path, per_dataset=6, seed=1)
    kept = read_dataset(tmp_path, BY_SHORT["VSOD"])
    assert [s.sample_id for s in kept] == [0, 2, 3, 5]  # strong_occlusions false skipped
    filtered = read_dataset(tmp_path, BY_SHORT["VSOD"], {"OcclusionDataSet-MM20": {5, 2, 99}})
    assert [s.sample_id for s in filtered] == [2, 5]  # file order
    path = tmp_path / "QuickDraw_preprocessed.jsonl"
    lines = path.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["categories"]
    path.write_text("\n".join([lines[0], json.dumps(broken)]) + "\n")
    with pytest.raises(UserError, match=r"QuickDraw_preprocessed.jsonl:2: field 'categories' "
                                        "is missing"):
        read_dataset(tmp_path, BY_SHORT["QD"])
    with pytest.raises(UserError, match="must hold ChangeIt_preprocessed.jsonl"):
        read_dataset(tmp_path / "nowhere", BY_SHORT["CIT"])
    with pytest.raises(UserError, match="field 'answer'"):
        sample("ROD", answer="pear")
    with pytest.raises(UserError, match="field 'image_template'"):
        sample("ROD", image_template="x/{frame}.png")
    # VSOD formats a zero-padded str: an integer format spec fails there as in the package.
    assert sample("ROD", image_template="x/{image:02d}.png").image_template
    with pytest.raises(UserError, match="field 'image_template'"):
        vsod(image_template="x/{image:02d}.png")

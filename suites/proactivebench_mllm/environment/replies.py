"""Reading a model's reply as the package reads it (environment.py:235-326): once as a full
option text, then as a letter, against one list of options."""

from __future__ import annotations

import re
from typing import Literal

from ..sample import EnvironmentCrash

Evaluation = Literal["correct", "wrong", "mismatch"]

# Everything up to the last capital letter followed by a period (and spaces) is dropped: greedy,
# first line only (no re.DOTALL), as upstream.
_LETTER_PREFIX = re.compile(r"^.*[A-Z]\.\s*")


def full_text(text: str) -> str:
    """The text compared with the options' (306-314): prefix dropped, lower-cased, stripped,
    every space removed (other whitespace inside is kept)."""
    return _LETTER_PREFIX.sub("", text).lower().strip().replace(" ", "")


def letter(text: str) -> str:
    """The letter of a reply (316-326): the text before the first ".", lower-cased and
    stripped; "#" when that is longer than one character ("(A)", "Answer: C")."""
    head = text.split(".")[0].lower().strip()
    return "#" if len(head) > 1 else head


def read(reply: str, accepted: list[str], options: list[str],
         shift: int) -> tuple[Evaluation, str]:
    """How `reply` reads against `options` (lettered from chr(65 + shift)), of which `accepted`
    are correct: the evaluation and the option it names ("" on a mismatch)."""
    answer = full_text(reply)
    standard = [full_text(o) for o in options]
    if answer in [full_text(a) for a in accepted]:
        return "correct", options[standard.index(answer)]
    if answer in standard:
        return "wrong", options[standard.index(answer)]
    chosen = letter(reply)
    try:
        accepted_letters = [letter(chr(65 + options.index(a) + shift)) for a in accepted]
    except ValueError:
        raise EnvironmentCrash(f"an accepted answer is not among the options {options}") from None
    option_letters = [letter(chr(65 + i + shift)) for i in range(len(options))]
    if chosen in accepted_letters:
        return "correct", options[option_letters.index(chosen)]
    if chosen in option_letters:
        return "wrong", options[option_letters.index(chosen)]
    return "mismatch", ""

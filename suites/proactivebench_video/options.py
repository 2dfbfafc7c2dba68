"""The video ProactiveBench's options of the evaluation commands (suites/command_line.py)."""

from __future__ import annotations

from typing import Any

from ..command_line import CommandLine


def _corpus_options(corpus: Any) -> None:
    corpus.add_argument("--parts", metavar="LIST",
                        help="proactivebench-video: comma-separated parts to evaluate "
                             "(WEB,EGO,TV,VAD; default: all four)")
    corpus.add_argument("--skip-undecodable-videos", dest="skip_undecodable",
                        action="store_true",
                        help="proactivebench-video: run the rest when a video cannot be "
                             "decoded (its turns are error rows, counted apart as "
                             "'undecodable video'); without it such a video is a one-line "
                             "error naming the file, before any call")


COMMAND_LINE = CommandLine(corpus_options=_corpus_options)

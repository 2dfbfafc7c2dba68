"""The multimodal ProactiveBench's options of the evaluation commands
(suites/command_line.py)."""

from __future__ import annotations

import argparse

from ..command_line import CommandLine


def _option_group(parser: argparse.ArgumentParser) -> None:
    mllm = parser.add_argument_group("multimodal ProactiveBench (--suite proactivebench-mllm)")
    mllm.add_argument("--datasets", metavar="LIST",
                      help="comma-separated datasets by short or full name: ROD, VSOD, "
                           "MVP-N, IN-C, QD, CIT, COCO (default: all seven)")
    mllm.add_argument("--mode", choices=("mcqa", "oeg"),
                      help="mcqa (default): multiple choice, step by step; oeg: the first "
                           "view answered freely, scored by --judge-model")
    mllm.add_argument("--hint", action="store_true",
                      help="append each dataset's hint to the question")
    mllm.add_argument("--reference", action="store_true",
                      help="the unoccluded reference image, categories only, one step")
    mllm.add_argument("--package", metavar="FILE",
                      help="a copy of the proactivebench 0.1.1 wheel (offline; default: "
                           "fetched once with pip and cached in the store)")


COMMAND_LINE = CommandLine(option_group=_option_group)

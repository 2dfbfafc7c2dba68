#!/bin/sh
# Take the screenshots of docs/images again, with the test tier's headless Chromium: the tests
# that open the pages write them where PROACTFLOW_SCREENSHOTS says (a temporary folder
# otherwise). Run from the repository's root, with its .venv (see CONTRIBUTING.md).
set -e
cd "$(dirname "$0")/.."
PROACTFLOW_SCREENSHOTS="$PWD/docs/images" exec .venv/bin/pytest -p no:xdist -q \
    "tests/test_history.py::test_five_nights" \
    "tests/test_viewer_suites.py" \
    "tests/test_viewer.py" "$@"

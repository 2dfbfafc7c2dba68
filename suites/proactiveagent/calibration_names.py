"""Names of the calibration suite, importable without the suite (the CLI's parser needs them
before anything heavy is imported)."""

CALIBRATION = "proactiveagent-calibration"
"""The suite's name."""
LABELLED = "human-labelled proposals"
"""What the test set is called in the model-under-test columns."""

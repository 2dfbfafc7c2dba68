"""Stages: small functions from typed input tables plus settings to one typed output table.

Each module is named after the table it produces; each has a STAGE name and a VERSION that enter
the artifact key, so changing what a stage computes means bumping its VERSION.
"""

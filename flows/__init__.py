"""Prefect flows that wire the stages together."""

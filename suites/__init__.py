"""Benchmarks, one folder each (ProactBench's stages still live in stages/ until the suite seam
of issue #8 lands)."""

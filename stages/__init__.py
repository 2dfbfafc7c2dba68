"""The generic stages, written once for every suite (suites/base.py is the seam).

Each stage module is named after the table it produces and splits its work in three: the suite
plans each request (pure: rows in, a request out), the stage executes the requests through the
one edge to providers (proactflow/providers/llm.py: the per-call cache, leases, pacing,
retries), and the suite interprets each outcome into a typed row (pure). Artifact keys name the
suite's stage and version, so changing what a suite computes means bumping its version in
`Suite.stages`.

Beside the stages, how a stage runs its calls: a fixed pool of workers (pools.py) and the
hand-over of rows to the next stage while the first still runs (streaming.py).
"""

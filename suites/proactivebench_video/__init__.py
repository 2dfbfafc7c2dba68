"""The video ProactiveBench (ProactiveVideoQA, arXiv 2507.09313): a video LLM watches a video as
it plays, one step a second, and decides when to speak; PAUC scores its replies by content and
timing. This package is the suite's pure core (annotations, the streaming protocol, frames,
PAUC); the pipeline seam wires it into the stages."""

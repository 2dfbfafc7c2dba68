"""ProactBench (Boson AI, 2026): 198 dialogues, 624 trigger points with rubrics, a judge LLM
scoring each regenerated reply PASS / PARTIAL / FAIL, weighted scores per phase."""

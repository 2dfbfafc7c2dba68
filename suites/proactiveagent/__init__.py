"""Proactive Agent's ProactiveBench (THUNLP, 2024): event traces, a proposed task or none per
event, a reward model (or an LLM judge) accepting or rejecting it, F1 per split."""

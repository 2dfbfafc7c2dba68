"""The content-addressed artifact store and the per-call response cache."""

"""The multimodal ProactiveBench (`proactivebench` 0.1.1, MIT): its environments re-implemented
as pure state transitions, its corpus reader and its open-ended judge protocol."""

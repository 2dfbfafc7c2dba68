"""The edge to LLM providers: what one call is and what came of it (chat.py), what a message
holds, text or images (content.py), the client that makes the call through the per-call cache
(llm.py) and its HTTP attempts with retries, limits and a breaker (http_attempts.py), what a
provider's failure means (provider_errors.py), a role's call counters and breaker
(call_health.py), and litellm's per-reply pricing skipped (litellm_costs.py).

May import: common, cache, limits, config.
"""

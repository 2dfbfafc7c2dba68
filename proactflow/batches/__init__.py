"""Provider batch APIs (`--batch`): a role's calls sent as batches at the provider's batch price,
recorded in the store before the run goes on, so that a run stopped at any moment, on any host,
finds its batches again and no request is ever paid twice.

protocol.py says what a provider's batch API must do for proactflow; one module per provider
implements it.

May import: common, cache, limits, config, providers.
"""

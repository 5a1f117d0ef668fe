"""The evidence contract's fixed rules: wire shapes, JSON text, the request and its budget, text normalization.

Nothing here knows about batches or files; every stage and the run layer build on it.
"""

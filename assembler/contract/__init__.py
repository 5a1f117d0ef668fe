"""The evidence contract's fixed rules: wire shapes, JSON text, the request and its budget, text normalization;
and the Arrow and NumPy column helpers they are computed with.

Nothing here knows about batches or files; every stage and the run layer build on it.
"""

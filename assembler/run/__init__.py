"""Batch runs over files: readers and writers, record validation, the Arrow entry point, outputs,
and the engines (one process, a process pool, Ray). ``RunOptions`` is what every engine takes."""

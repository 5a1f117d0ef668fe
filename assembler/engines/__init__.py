"""Execution engines beyond the local chunk loop; each imports its framework lazily."""

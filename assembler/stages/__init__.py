"""One module per pipeline stage, in pipeline order: lanes in, fuse, neardup, reorder, groups,
diversity, admission, package (with plan). Each is columnar over a whole batch of queries."""

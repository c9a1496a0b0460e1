"""Stage entry points: each takes a planned spec and writes one artifact."""

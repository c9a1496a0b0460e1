"""Configuration: loading, validating and merging the workflow config, its grids, and its reference."""

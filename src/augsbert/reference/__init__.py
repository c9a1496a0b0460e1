"""The generated reference (`make schema`): the config schema's stage sections from the options classes (schema.py)
and docs/reference/stages.md from the stage registry (stage_reference.py)."""

"""The user's face beyond the stage commands: listing, export, fetching models and data, model cards."""

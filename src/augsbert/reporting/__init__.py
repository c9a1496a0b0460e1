"""Tables and charts built from results files."""

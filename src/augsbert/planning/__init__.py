"""Planning: the plan graph of content-addressed stage nodes (`graph`), which the stages' planning hooks fill."""

"""Planning: the validated config -> graphs of content-addressed stage nodes (`graph`), wired per experiment (`plan`)."""

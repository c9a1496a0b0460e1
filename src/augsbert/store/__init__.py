"""The artifact store: content-addressed keys, artifact directories, manifests and what a job re-checks."""

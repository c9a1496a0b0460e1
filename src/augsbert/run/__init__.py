"""Running the workflow's jobs: warm starts (warm.py: the socket client, the server's start and its keeper;
warm_server.py: the server that imports the libraries once and runs each command in a fork) and the every-kind
rehearsal on stand-ins (rehearse.py)."""

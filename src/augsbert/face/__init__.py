"""The command line: `augsbert <command>` (cli.py; export_command.py, `augsbert export`'s arguments), each command
parsing its arguments and calling its layer, and the console script that hands a warm run's job over (launch.py)."""

"""The sweep, driver process only: its phases, Tune run/restore, export, output paths, monitor."""
